// Python view of the parameter server (fleet._core.ps): server, client and futures, the tables
// and update rules on their own (for tests without RPC). The fleet.ps package wraps these.
//
// Configs cross as serialised protobuf (fleet/proto/ps_pb2.py); arrays cross without copies and
// must be C-contiguous with the exact dtype (int64 keys, float32 values), which the Python
// wrappers ensure. Every blocking call releases the GIL. ThrowIfError is the one place where an
// absl::Status of the engine becomes an exception (mapped to fleet.errors by bind_errors.cc).

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>

#include "core/errors.h"
#include "ps/client.h"
#include "ps/dense_table.h"
#include "ps/raw_call.h"
#include "ps/server.h"
#include "ps/serving_allocator.h"
#include "ps/sparse_table.h"
#include "python/bindings.h"

namespace fleet::python {
namespace {

using ps::proto::SaveMode;

void ThrowIfError(const absl::Status& status) {
  if (status.ok()) return;
  const std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kDataLoss:  // a damaged or foreign file: wrong content passed in
      throw InvalidArgument(message);
    case absl::StatusCode::kNotFound:
      throw NotFound(message);
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kAborted:
      throw Unavailable(message);
    case absl::StatusCode::kDeadlineExceeded:
      throw Timeout(message);
    default:
      throw Internal(absl::StrCat(absl::StatusCodeToString(status.code()), ": ", message));
  }
}

template <class T>
T ValueOrThrow(absl::StatusOr<T> value) {
  ThrowIfError(value.status());
  return std::move(*value);
}

template <class Message>
Message ParseMessage(const py::bytes& bytes, const char* what) {
  Message message;
  FLEET_ENFORCE(message.ParseFromString(std::string(bytes)), InvalidArgument,
                "cannot parse the serialised ", what);
  return message;
}

absl::Duration Seconds(double seconds) { return absl::Milliseconds(seconds * 1000.0); }

// A C-contiguous array of exactly T, as a span over its memory.
template <class T>
absl::Span<T> ArraySpan(const py::array& array, const char* what, bool writable) {
  using Element = std::remove_const_t<T>;
  FLEET_ENFORCE(array.dtype().is(py::dtype::of<Element>()), InvalidArgument, what,
                ": expected dtype ", py::str(py::dtype::of<Element>()).cast<std::string>(),
                ", got ", py::str(array.dtype()).cast<std::string>());
  FLEET_ENFORCE(array.flags() & py::array::c_style, InvalidArgument, what,
                ": the array must be C-contiguous");
  FLEET_ENFORCE(!writable || array.writeable(), InvalidArgument, what,
                ": the array must be writable");
  return absl::Span<T>(static_cast<T*>(const_cast<void*>(array.data())),
                       static_cast<size_t>(array.size()));
}

py::dict StatsToDict(const ps::proto::TableStats& stats) {
  py::dict d;
  d["table_id"] = stats.table_id();
  d["type"] = stats.type() == ps::proto::SPARSE ? "sparse" : "dense";
  d["rows"] = stats.rows();
  d["bytes"] = stats.bytes();
  d["filtered_keys"] = stats.filtered_keys();
  return d;
}

// A client call in flight. Holds the arrays the call reads or writes until it completes; the
// destructor waits for it (bounded by the RPC deadlines) so that no RPC writes into a freed
// array.
struct PyFuture {
  ps::Future future;
  py::object result;     // returned by wait(): the output array, or None
  py::object keepalive;  // input arrays

  ~PyFuture() {
    py::gil_scoped_release release;
    future.Wait().IgnoreError();
  }
  py::object Wait() {
    absl::Status status;
    {
      py::gil_scoped_release release;
      status = future.Wait();
    }
    ThrowIfError(status);
    return result;
  }
};

PyFuture* MakeFuture(ps::Future future, py::object result, py::object keepalive) {
  return new PyFuture{std::move(future), std::move(result), std::move(keepalive)};
}

void BindFuture(py::module_& m) {
  py::class_<PyFuture>(m, "Future", "An asynchronous client call; wait() returns its result.")
      .def("wait", &PyFuture::Wait,
           "Blocks until the call completes (bounded by the RPC deadlines); returns the output "
           "array of a pull (None otherwise) or raises the call's error.")
      .def("ready", [](const PyFuture& f) { return f.future.Ready(); })
      .def(
          "wait_for",
          [](const PyFuture& f, double timeout_s) {
            py::gil_scoped_release release;
            return f.future.WaitFor(Seconds(timeout_s));
          },
          py::arg("timeout_s"), "Waits up to timeout_s seconds; True when the call completed.");
}

void BindServer(py::module_& m) {
  py::class_<ps::PsServer>(m, "Server", "A parameter server serving in background threads.")
      .def_static(
          "start",
          [](const py::bytes& config, const std::string& address, int max_threads) {
            ps::ServerOptions options;
            options.config = ParseMessage<ps::proto::ServerConfig>(config, "ServerConfig");
            options.address = address;
            options.max_threads = max_threads;
            py::gil_scoped_release release;
            return ValueOrThrow(ps::PsServer::Start(options));
          },
          py::arg("config"), py::arg("address") = "127.0.0.1:0", py::arg("max_threads") = 256)
      .def_property_readonly("endpoint", &ps::PsServer::endpoint)
      .def("describe", &ps::PsServer::Describe)
      .def("request_stop", &ps::PsServer::RequestStop)
      .def(
          "wait_for_stop_request",
          [](ps::PsServer& s, double timeout_s) {
            py::gil_scoped_release release;
            return s.WaitForStopRequest(Seconds(timeout_s));
          },
          py::arg("timeout_s"))
      .def(
          "shutdown",
          [](ps::PsServer& s, double grace_s) {
            py::gil_scoped_release release;
            s.Shutdown(Seconds(grace_s));
          },
          py::arg("grace_s") = 5.0);
}

std::optional<uint32_t> TableArg(const py::object& table_id) {
  if (table_id.is_none()) return std::nullopt;
  return table_id.cast<uint32_t>();
}

void BindClientCalls(py::class_<ps::PsClient>& c) {
  c.def(
       "pull_sparse_async",
       [](ps::PsClient& client, uint32_t table, const py::array& keys, const py::array& out) {
         auto k = ArraySpan<const int64_t>(keys, "keys", false);
         auto o = ArraySpan<float>(out, "out", true);
         // Deduplicating and routing 100k keys takes a millisecond: let other threads run.
         // PullSparse has copied the keys when it returns; the future keeps `out` alive.
         ps::Future f = [&] {
           py::gil_scoped_release release;
           return client.PullSparse(table, k, o);
         }();
         return MakeFuture(std::move(f), out, py::none());
       },
       py::arg("table_id"), py::arg("keys"), py::arg("out"))
      .def(
          "push_sparse_async",
          [](ps::PsClient& client, uint32_t table, const py::array& keys, const py::array& grads,
             bool is_delta) {
            auto k = ArraySpan<const int64_t>(keys, "keys", false);
            auto g = ArraySpan<const float>(grads, "grads", false);
            // PushSparse copies what it needs before returning (the arrays may be reused).
            ps::Future f = [&] {
              py::gil_scoped_release release;
              return client.PushSparse(table, k, g, is_delta);
            }();
            return MakeFuture(std::move(f), py::none(), py::none());
          },
          py::arg("table_id"), py::arg("keys"), py::arg("grads"), py::arg("is_delta") = false)
      .def(
          "pull_dense_async",
          [](ps::PsClient& client, uint32_t table, const py::array& out) {
            auto f = client.PullDense(table, ArraySpan<float>(out, "out", true));
            return MakeFuture(std::move(f), out, py::none());
          },
          py::arg("table_id"), py::arg("out"))
      .def(
          "push_dense_async",
          [](ps::PsClient& client, uint32_t table, const py::array& grads, bool is_delta) {
            auto f =
                client.PushDense(table, ArraySpan<const float>(grads, "grads", false), is_delta);
            return MakeFuture(std::move(f), py::none(), py::none());
          },
          py::arg("table_id"), py::arg("grads"), py::arg("is_delta") = false)
      .def(
          "barrier_async",
          [](ps::PsClient& client, const std::string& name, uint32_t num_workers,
             uint32_t worker_id, double timeout_s) {
            return MakeFuture(client.Barrier(name, num_workers, worker_id, Seconds(timeout_s)),
                              py::none(), py::none());
          },
          py::arg("name"), py::arg("num_workers"), py::arg("worker_id"), py::arg("timeout_s"));
}

void BindClientAdmin(py::class_<ps::PsClient>& c) {
  c.def(
       "save",
       [](ps::PsClient& client, const std::string& dirname, const py::object& table_id,
          bool delta) {
         auto table = TableArg(table_id);
         py::gil_scoped_release release;
         return ValueOrThrow(
             client.Save(dirname, table, delta ? ps::proto::DELTA : ps::proto::BASE));
       },
       py::arg("dirname"), py::arg("table_id") = py::none(), py::arg("delta") = false)
      .def(
          "load",
          [](ps::PsClient& client, const std::string& dirname, const py::object& table_id) {
            auto table = TableArg(table_id);
            py::gil_scoped_release release;
            return ValueOrThrow(client.Load(dirname, table));
          },
          py::arg("dirname"), py::arg("table_id") = py::none())
      .def(
          "shrink",
          [](ps::PsClient& client, uint32_t table_id, uint32_t max_unseen_saves) {
            py::gil_scoped_release release;
            return ValueOrThrow(client.Shrink(table_id, max_unseen_saves));
          },
          py::arg("table_id"), py::arg("max_unseen_saves"))
      .def("stats",
           [](ps::PsClient& client) {
             absl::StatusOr<std::vector<std::vector<ps::proto::TableStats>>> stats;
             {
               py::gil_scoped_release release;
               stats = client.Stats();
             }
             py::list servers;
             for (const auto& tables : ValueOrThrow(std::move(stats))) {
               py::list list;
               for (const auto& t : tables) list.append(StatsToDict(t));
               servers.append(list);
             }
             return servers;
           })
      .def("heartbeat",
           [](ps::PsClient& client) {
             py::gil_scoped_release release;
             ThrowIfError(client.Heartbeat());
           })
      .def("stop_servers", [](ps::PsClient& client) {
        py::gil_scoped_release release;
        ThrowIfError(client.StopServers());
      });
}

void BindClient(py::module_& m) {
  py::class_<ps::PsClient> c(m, "Client", "A worker's connection to every parameter server.");
  c.def(py::init([](const std::vector<std::string>& endpoints, double connect_timeout_s,
                    double rpc_timeout_s, double admin_timeout_s, size_t max_keys_per_request) {
          ps::ClientOptions options;
          options.endpoints = endpoints;
          options.connect_timeout = Seconds(connect_timeout_s);
          options.rpc_timeout = Seconds(rpc_timeout_s);
          options.admin_timeout = Seconds(admin_timeout_s);
          options.max_keys_per_request = max_keys_per_request;
          py::gil_scoped_release release;
          return ValueOrThrow(ps::PsClient::Connect(std::move(options)));
        }),
        py::arg("endpoints"), py::arg("connect_timeout_s") = 10.0, py::arg("rpc_timeout_s") = 30.0,
        py::arg("admin_timeout_s") = 600.0, py::arg("max_keys_per_request") = 32768)
      .def_property_readonly("endpoints", &ps::PsClient::endpoints)
      .def(
          "table_config",
          [](const ps::PsClient& client, uint32_t table_id) {
            return py::bytes(ValueOrThrow(client.Table(table_id)).SerializeAsString());
          },
          py::arg("table_id"), "The serialised TableConfig the servers reported.");
  BindClientCalls(c);
  BindClientAdmin(c);
}

void BindTables(py::module_& m) {
  py::class_<ps::SparseTable>(m, "SparseTable", "One server's sparse table, without RPC.")
      .def(py::init([](const py::bytes& config) {
             return ValueOrThrow(ps::SparseTable::Create(
                 ParseMessage<ps::proto::TableConfig>(config, "TableConfig")));
           }),
           py::arg("config"))
      .def_property_readonly("dim", &ps::SparseTable::dim)
      .def_property_readonly("row_width", &ps::SparseTable::row_width)
      .def(
          "pull",
          [](ps::SparseTable& t, const py::array& keys, std::optional<py::array> out) {
            auto k = ArraySpan<const int64_t>(keys, "keys", false);
            py::array result =
                out ? *out
                    : py::array_t<float>({static_cast<py::ssize_t>(k.size()),
                                          static_cast<py::ssize_t>(t.dim())});
            auto o = ArraySpan<float>(result, "out", true);
            {
              py::gil_scoped_release release;
              ThrowIfError(t.Pull(k, o));
            }
            return result;
          },
          py::arg("keys"), py::arg("out") = py::none(),
          "The rows of keys, float32 [len(keys), dim], into `out` when given (len(keys) * dim "
          "float32 elements, reused across calls) or a new array.")
      .def(
          "push",
          [](ps::SparseTable& t, const py::array& keys, const py::array& grads, bool is_delta) {
            auto k = ArraySpan<const int64_t>(keys, "keys", false);
            auto g = ArraySpan<const float>(grads, "grads", false);
            py::gil_scoped_release release;
            ThrowIfError(t.Push(k, g, is_delta));
          },
          py::arg("keys"), py::arg("grads"), py::arg("is_delta") = false)
      .def(
          "save",
          [](ps::SparseTable& t, const std::string& path, bool delta) {
            py::gil_scoped_release release;
            return ValueOrThrow(t.Save(path, delta ? ps::proto::DELTA : ps::proto::BASE));
          },
          py::arg("path"), py::arg("delta") = false)
      .def(
          "load",
          [](ps::SparseTable& t, const std::vector<std::string>& paths, uint32_t server_index,
             uint32_t num_servers) {
            py::gil_scoped_release release;
            std::vector<std::unique_ptr<ps::TableFileReader>> readers;
            std::vector<ps::TableFileReader*> parts;
            for (const auto& path : paths) {
              readers.push_back(ValueOrThrow(ps::TableFileReader::Open(path)));
              parts.push_back(readers.back().get());
            }
            return ValueOrThrow(t.Load(parts, [&](int64_t key) {
              return ps::HashKeyShard(key, num_servers) == server_index;
            }));
          },
          py::arg("paths"), py::arg("server_index") = 0, py::arg("num_servers") = 1)
      .def("shrink", &ps::SparseTable::Shrink, py::arg("max_unseen_saves"))
      .def("stats", [](const ps::SparseTable& t) { return StatsToDict(t.Stats()); });

  py::class_<ps::DenseTable>(m, "DenseTable", "One server's blocks of a dense table.")
      .def(py::init([](const py::bytes& config, uint32_t server_index, uint32_t num_servers) {
             return ValueOrThrow(
                 ps::DenseTable::Create(ParseMessage<ps::proto::TableConfig>(config, "TableConfig"),
                                        server_index, num_servers, ps::RoundRobinBlockShard));
           }),
           py::arg("config"), py::arg("server_index") = 0, py::arg("num_servers") = 1)
      .def_property_readonly("local_size", &ps::DenseTable::local_size)
      .def("pull",
           [](const ps::DenseTable& t) {
             py::array_t<float> out(static_cast<py::ssize_t>(t.local_size()));
             ThrowIfError(t.Pull(absl::Span<float>(out.mutable_data(), out.size())));
             return out;
           })
      .def(
          "push",
          [](ps::DenseTable& t, const py::array& grads, bool is_delta) {
            auto g = ArraySpan<const float>(grads, "grads", false);
            py::gil_scoped_release release;
            ThrowIfError(t.Push(g, is_delta));
          },
          py::arg("grads"), py::arg("is_delta") = false)
      .def("stats", [](const ps::DenseTable& t) { return StatsToDict(t.Stats()); });
}

void BindUpdateRule(py::module_& m) {
  py::class_<ps::UpdateRule>(m, "UpdateRule", "A server-side optimizer, on NumPy rows.")
      .def(py::init([](const py::bytes& config) {
             return ValueOrThrow(ps::MakeUpdateRule(
                 ParseMessage<ps::proto::OptimizerConfig>(config, "OptimizerConfig")));
           }),
           py::arg("config"))
      .def("state_dim", &ps::UpdateRule::StateDim, py::arg("dim"))
      .def(
          "init_state",
          [](const ps::UpdateRule& rule, size_t dim) {
            py::array_t<float> state(static_cast<py::ssize_t>(rule.StateDim(dim)));
            rule.InitState(dim, state.mutable_data());
            return state;
          },
          py::arg("dim"))
      .def(
          "update",
          [](const ps::UpdateRule& rule, const py::array& w, const py::array& state,
             const py::array& grad) {
            auto ws = ArraySpan<float>(w, "w", true);
            auto ss = ArraySpan<float>(state, "state", true);
            auto gs = ArraySpan<const float>(grad, "grad", false);
            FLEET_ENFORCE(gs.size() == ws.size() && ss.size() == rule.StateDim(ws.size()),
                          InvalidArgument, "update: w and grad need the same size and state ",
                          rule.StateDim(ws.size()), " floats");
            rule.Update(ws.size(), ws.data(), ss.data(), gs.data());
          },
          py::arg("w"), py::arg("state"), py::arg("grad"), "Updates w and state in place.");
}

}  // namespace

void BindPs(py::module_& m) {
  py::module_ ps = m.def_submodule("ps", "Parameter server engine (private; use fleet.ps)");
  BindFuture(ps);
  BindServer(ps);
  BindClient(ps);
  BindTables(ps);
  BindUpdateRule(ps);
  ps.def(
      "tune_allocator_for_serving",
      [] {
        const ps::AllocatorTuning t = ps::TuneAllocatorForServing();
        py::dict out;
        out["applied"] = t.applied;
        out["mmap_threshold"] = t.mmap_threshold;
        out["trim_threshold"] = t.trim_threshold;
        return out;
      },
      "Keeps large freed buffers in the heap for reuse instead of unmapping them (glibc), so "
      "that requests do not fault their buffers in again; process-wide, for server processes. "
      "Returns what was applied.");
  ps.def(
      "hash_key_shard",
      [](const py::array& keys, uint32_t num_servers) {
        auto k = ArraySpan<const int64_t>(keys, "keys", false);
        FLEET_ENFORCE(num_servers > 0, InvalidArgument, "hash_key_shard: num_servers is 0");
        py::array_t<uint32_t> out(static_cast<py::ssize_t>(k.size()));
        for (size_t i = 0; i < k.size(); ++i)
          out.mutable_data()[i] = ps::HashKeyShard(k[i], num_servers);
        return out;
      },
      py::arg("keys"), py::arg("num_servers"),
      "The server owning each key under the default sharding.");
  ps.def(
      "raw_call",
      [](const std::string& endpoint, const std::string& method, const py::bytes& request,
         double timeout_s) {
        std::string raw(request);
        absl::StatusOr<std::string> reply;
        {
          py::gil_scoped_release release;
          reply = ps::RawCall(endpoint, absl::StrCat("/fleet.ps.proto.PsService/", method), raw,
                              Seconds(timeout_s));
        }
        return py::bytes(ValueOrThrow(std::move(reply)));
      },
      py::arg("endpoint"), py::arg("method"), py::arg("request"), py::arg("timeout_s") = 10.0,
      "Sends a serialised request to PsService.<method> unchecked (tests, debugging); returns "
      "the serialised reply.");
}

}  // namespace fleet::python
