// Python view of the collective area: rendezvous stores, the TCP store server and Gloo groups.
// Every call that may block (network, waiting for peers) releases the GIL, so ranks can run as
// threads of one Python process and other Python threads keep running during a collective.

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "collective/file_store.h"
#include "collective/gloo_backend.h"
#include "collective/memory_store.h"
#include "collective/tcp_store.h"
#include "core/status.h"
#include "core/timeout.h"
#include "python/bindings.h"
#include "python/numpy_convert.h"

namespace fleet::python {
namespace {

using collective::Duration;
using collective::GlooBackend;
using collective::Store;

// Every timeout of these bindings goes through the one conversion (core/timeout.h).
Duration FromSeconds(double seconds, const char* name = "timeout_s") {
  return ValueOrThrow(TimeoutMillisFromSeconds(seconds, name));
}

// Owns a TcpStoreServer so Python can stop it deterministically with close().
class StoreServer {
 public:
  StoreServer(const std::string& host, int port, const std::string& job_id)
      : server_(std::make_unique<collective::TcpStoreServer>(host, port, job_id)) {}
  int port() const { return Get().port(); }
  std::string endpoint() const { return Get().endpoint(); }
  std::vector<std::string> serving_errors() const { return Get().ServingErrors(); }
  void Close() { server_.reset(); }

 private:
  const collective::TcpStoreServer& Get() const {
    FLEET_ENFORCE(server_ != nullptr, InvalidArgument, "the TCP store server is closed");
    return *server_;
  }
  std::unique_ptr<collective::TcpStoreServer> server_;
};

// Recycles the memory of the arrays that all_reduce / all_gather return. A fresh large array costs
// an mmap, a page fault per 4 KB and the kernel's zeroing on first touch (about a third of a
// 64 MB loopback all-reduce); reusing a freed result of the same size skips all three. Arrays
// keep the pool alive through their base capsule, so results may outlive their group.
class ResultPool : public std::enable_shared_from_this<ResultPool> {
 public:
  ~ResultPool() {
    for (auto& [bytes, data] : free_) std::free(data);
  }

  py::array NewArray(const py::dtype& dtype, const std::vector<py::ssize_t>& shape) {
    size_t bytes = static_cast<size_t>(dtype.itemsize());
    for (py::ssize_t d : shape) bytes *= static_cast<size_t>(d);
    if (bytes < kMinPooledBytes) return py::array(dtype, shape);
    auto* lease = new Lease{shared_from_this(), Take(bytes), bytes};
    py::capsule owner(lease, [](void* p) { delete static_cast<Lease*>(p); });
    return py::array(dtype, shape, lease->data, owner);
  }

 private:
  static constexpr size_t kMinPooledBytes = 256 << 10;
  static constexpr size_t kMaxFreeBytes = 512 << 20;

  struct Lease {
    std::shared_ptr<ResultPool> pool;
    void* data;
    size_t bytes;
    ~Lease() { pool->Give(data, bytes); }
  };

  void* Take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(bytes);
      if (it != free_.end()) {
        void* data = it->second;
        free_.erase(it);
        free_bytes_ -= bytes;
        return data;
      }
    }
    void* data = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (data == nullptr) throw std::bad_alloc();
    return data;
  }

  void Give(void* data, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_bytes_ + bytes > kMaxFreeBytes) {
      std::free(data);
      return;
    }
    free_.emplace(bytes, data);
    free_bytes_ += bytes;
  }

  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t free_bytes_ = 0;
};

// What Python holds as a GlooGroup: the group, the pool its results come from, and the timeout
// of calls that do not give their own.
struct PyGlooGroup {
  std::shared_ptr<GlooBackend> backend;
  double collective_timeout_s = 1800.0;
  std::shared_ptr<ResultPool> pool = std::make_shared<ResultPool>();

  // A call's own timeout, else the group's.
  Duration Timeout(const std::optional<double>& timeout_s) const {
    return FromSeconds(timeout_s.value_or(collective_timeout_s));
  }
};

std::vector<int64_t> ShapeOf(const py::array& array) {
  return std::vector<int64_t>(array.shape(), array.shape() + array.ndim());
}

// NumPy's name of the element type ("<f4"), which the call check compares across ranks.
std::string ElementType(const py::array& array) {
  return py::str(array.dtype().attr("str")).cast<std::string>();
}

void BindStores(py::module_& m) {
  py::class_<Store, std::shared_ptr<Store>>(m, "Store",
                                            "Key-value rendezvous store (see csrc/collective)")
      .def(
          "set",
          [](Store& s, const std::string& key, const py::bytes& value) {
            std::string v = value;
            py::gil_scoped_release release;
            s.Set(key, v);
          },
          py::arg("key"), py::arg("value"))
      .def(
          "get",
          [](Store& s, const std::string& key, double timeout_s) {
            std::string v;
            {
              py::gil_scoped_release release;
              v = s.Get(key, FromSeconds(timeout_s));
            }
            return py::bytes(v);
          },
          py::arg("key"), py::arg("timeout_s"), "Blocks until the key exists.")
      .def("add", &Store::Add, py::arg("key"), py::arg("delta"),
           py::call_guard<py::gil_scoped_release>())
      .def("check", &Store::Check, py::arg("keys"), py::call_guard<py::gil_scoped_release>())
      .def(
          "wait",
          [](Store& s, const std::vector<std::string>& keys, double timeout_s) {
            s.Wait(keys, FromSeconds(timeout_s));
          },
          py::arg("keys"), py::arg("timeout_s"), py::call_guard<py::gil_scoped_release>())
      .def("describe", &Store::Describe);
  py::class_<collective::MemoryStore, Store, std::shared_ptr<collective::MemoryStore>>(
      m, "MemoryStore")
      .def(py::init<>());
  py::class_<collective::FileStore, Store, std::shared_ptr<collective::FileStore>>(m, "FileStore")
      .def(py::init<std::string>(), py::arg("path"));
  py::class_<collective::TcpStore, Store, std::shared_ptr<collective::TcpStore>>(m, "TcpStore")
      .def(py::init([](const std::string& host, int port, double connect_timeout_s,
                       double io_timeout_s, const std::string& job_id) {
             collective::TcpStoreOptions options{FromSeconds(connect_timeout_s),
                                                 FromSeconds(io_timeout_s), job_id};
             py::gil_scoped_release release;
             return std::make_shared<collective::TcpStore>(host, port, options);
           }),
           py::arg("host"), py::arg("port"), py::arg("connect_timeout_s") = 30.0,
           py::arg("io_timeout_s") = 30.0, py::arg("job_id") = "");
  py::class_<StoreServer>(m, "TcpStoreServer", "Serves a TcpStore until close() or deletion")
      .def(py::init<std::string, int, std::string>(), py::arg("host"), py::arg("port") = 0,
           py::arg("job_id") = "")
      .def_property_readonly("port", &StoreServer::port)
      .def_property_readonly("endpoint", &StoreServer::endpoint)
      .def_property_readonly("serving_errors", &StoreServer::serving_errors,
                             "The last failures of the store while serving a client (out of "
                             "memory, no thread for a connection), oldest first; each was also "
                             "written to stderr and sent to that client")
      .def("close", &StoreServer::Close, py::call_guard<py::gil_scoped_release>());
}

py::array AllReduce(PyGlooGroup& group, const py::array& array, const std::string& mode,
                    std::optional<double> timeout_s) {
  GlooBackend& g = *group.backend;
  collective::AllReduceOptions options{collective::ReduceOpFromName(mode), group.Timeout(timeout_s),
                                       ShapeOf(array)};
  DType dtype = DTypeOfArray(array, "all_reduce");
  py::array in = py::array::ensure(array, py::array::c_style);
  py::array out = group.pool->NewArray(
      in.dtype(), std::vector<py::ssize_t>(in.shape(), in.shape() + in.ndim()));
  const void* src = in.data();
  void* dst = out.mutable_data();
  const size_t count = static_cast<size_t>(in.size());
  {
    py::gil_scoped_release release;
    g.AllReduce(src, dst, count, dtype, options);
  }
  return out;
}

void AllReduceInPlace(PyGlooGroup& group, py::array array, const std::string& mode,
                      std::optional<double> timeout_s) {
  collective::AllReduceOptions options{collective::ReduceOpFromName(mode), group.Timeout(timeout_s),
                                       ShapeOf(array)};
  DType dtype = DTypeOfArray(array, "all_reduce_inplace");
  FLEET_ENFORCE(py::detail::check_flags(array.ptr(), py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ |
                                                         py::detail::npy_api::NPY_ARRAY_WRITEABLE_),
                InvalidArgument,
                "all_reduce_inplace: the array must be C-contiguous and writeable");
  void* data = array.mutable_data();
  const size_t count = static_cast<size_t>(array.size());
  py::gil_scoped_release release;
  group.backend->AllReduce(data, data, count, dtype, options);
}

// Rank r's array lands in row r of the result, which has shape (size, *array.shape).
py::array AllGather(PyGlooGroup& group, const py::array& array, std::optional<double> timeout_s) {
  GlooBackend& g = *group.backend;
  py::array in = py::array::ensure(array, py::array::c_style);
  std::vector<py::ssize_t> shape{g.size()};
  shape.insert(shape.end(), in.shape(), in.shape() + in.ndim());
  py::array out = group.pool->NewArray(in.dtype(), shape);
  const void* src = in.data();
  void* dst = out.mutable_data();
  const size_t bytes = static_cast<size_t>(in.nbytes());
  collective::AllGatherOptions options{group.Timeout(timeout_s), ShapeOf(in), ElementType(in)};
  {
    py::gil_scoped_release release;
    g.AllGather(src, dst, bytes, options);
  }
  return out;
}

// Gathers byte strings of any length: first the lengths, then the strings padded to the longest.
py::list AllGatherBytes(PyGlooGroup& group, const py::bytes& value,
                        std::optional<double> timeout_s) {
  GlooBackend& g = *group.backend;
  std::string mine = value;
  std::vector<int64_t> lengths(g.size());
  std::string gathered;
  const Duration timeout = group.Timeout(timeout_s);
  {
    py::gil_scoped_release release;
    collective::AllGatherOptions options{timeout, {}, "bytes length"};
    const int64_t length = static_cast<int64_t>(mine.size());
    g.AllGather(&length, lengths.data(), sizeof(length), options);
    const size_t longest = static_cast<size_t>(*std::max_element(lengths.begin(), lengths.end()));
    mine.resize(longest);
    gathered.resize(longest * g.size());
    g.AllGather(mine.data(), gathered.data(), longest, {timeout, {}, "bytes"});
  }
  py::list result;
  const size_t stride = gathered.size() / g.size();
  for (int r = 0; r < g.size(); ++r) {
    result.append(py::bytes(gathered.data() + r * stride, static_cast<size_t>(lengths[r])));
  }
  return result;
}

void BroadcastInPlace(PyGlooGroup& group, py::array array, int root,
                      std::optional<double> timeout_s) {
  GlooBackend& g = *group.backend;
  FLEET_ENFORCE(py::detail::check_flags(array.ptr(), py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ |
                                                         py::detail::npy_api::NPY_ARRAY_WRITEABLE_),
                InvalidArgument, "broadcast: the array must be C-contiguous and writeable");
  void* data = array.mutable_data();
  const size_t bytes = static_cast<size_t>(array.nbytes());
  collective::BroadcastOptions options{root, group.Timeout(timeout_s), ShapeOf(array),
                                       ElementType(array)};
  py::gil_scoped_release release;
  g.Broadcast(data, bytes, options);
}

void BindGloo(py::module_& m) {
  py::class_<PyGlooGroup>(m, "GlooGroup",
                          "A group of ranks running Gloo collectives over TCP (see gloo_backend.h)")
      .def_static(
          "connect",
          [](std::shared_ptr<Store> store, int rank, int size, const std::string& hostname,
             const std::string& name, double timeout_s, double collective_timeout_s,
             std::vector<std::string> rank_addresses) {
            collective::GlooOptions options{hostname, name, FromSeconds(timeout_s)};
            options.rank_addresses = std::move(rank_addresses);
            FromSeconds(collective_timeout_s);  // validated now, used by every call
            py::gil_scoped_release release;
            return PyGlooGroup{GlooBackend::Connect(store.get(), rank, size, options),
                               collective_timeout_s};
          },
          py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("hostname") = "127.0.0.1",
          py::arg("name") = "default", py::arg("timeout_s") = 120.0,
          py::arg("collective_timeout_s") = 1800.0,
          py::arg("rank_addresses") = std::vector<std::string>{},
          "Joins the group; blocks until all ranks have joined or the timeout names those "
          "missing (with their rank_addresses[r], \"host:port\", when given). "
          "collective_timeout_s bounds each later call that gives no timeout_s.")
      .def_property_readonly("collective_timeout_s",
                             [](const PyGlooGroup& g) { return g.collective_timeout_s; })
      .def_property_readonly("rank", [](const PyGlooGroup& g) { return g.backend->rank(); })
      .def_property_readonly("size", [](const PyGlooGroup& g) { return g.backend->size(); })
      .def_property_readonly("name", [](const PyGlooGroup& g) { return g.backend->name(); })
      .def("all_reduce", &AllReduce, py::arg("array"), py::arg("mode") = "sum",
           py::arg("timeout_s") = py::none(), "Returns a new array; the input is left unchanged.")
      .def("all_reduce_inplace", &AllReduceInPlace, py::arg("array"), py::arg("mode") = "sum",
           py::arg("timeout_s") = py::none(), "Overwrites `array` with the reduction.")
      .def("all_gather", &AllGather, py::arg("array"), py::arg("timeout_s") = py::none())
      .def("all_gather_bytes", &AllGatherBytes, py::arg("value"), py::arg("timeout_s") = py::none())
      .def("broadcast", &BroadcastInPlace, py::arg("array"), py::arg("root") = 0,
           py::arg("timeout_s") = py::none(), "Overwrites `array` with the root's on every rank.")
      .def(
          "barrier",
          [](PyGlooGroup& g, std::optional<double> timeout_s) {
            g.backend->Barrier(collective::BarrierOptions{g.Timeout(timeout_s)});
          },
          py::arg("timeout_s") = py::none(), py::call_guard<py::gil_scoped_release>());
}

}  // namespace

void BindCollective(py::module_& m) {
  BindStores(m);
  BindGloo(m);
}

}  // namespace fleet::python
