// Python view of the parameter server (fleet._core.ps): server, client and futures; the tables
// and update rules on their own are in bind_ps_tables.cc. The fleet.ps package wraps these.
//
// Configs cross as serialised protobuf (fleet/proto/ps_pb2.py); arrays cross without copies and
// must be C-contiguous with the exact dtype (int64 keys, float32 values), which the Python
// wrappers ensure. Every call that blocks, waits on a lock or works through a whole array releases
// the GIL. Timeouts are float seconds, converted by Seconds (TimeoutFromSeconds: one rule, one
// message); integers that C++ holds unsigned are taken signed and checked (U32, Count), so that
// a negative value is an InvalidArgument naming it rather than a pybind11 TypeError.
// ThrowIfError is the one place where an absl::Status of the engine becomes an exception (mapped
// to fleet.errors by bind_errors.cc).

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "core/errors.h"
#include "core/status.h"
#include "core/timeout.h"
#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps/server/serving_allocator.h"
#include "python/bindings.h"
#include "python/ps_bindings.h"

namespace fleet::python {
namespace {

using ps::proto::SaveMode;
// Shared with C++: a communicator (bind_distributed.cc) holds the client it was made with.
using PyClientClass = py::class_<ps::PsClient, std::shared_ptr<ps::PsClient>>;

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
      .def("ready",
           [](const PyFuture& f) {
             py::gil_scoped_release release;  // takes the call's lock
             return f.future.Ready();
           })
      .def(
          "wait_for",
          [](const PyFuture& f, double timeout_s) {
            const absl::Duration timeout = Seconds(timeout_s, "timeout_s", true);
            py::gil_scoped_release release;
            return f.future.WaitFor(timeout);
          },
          py::arg("timeout_s"), "Waits up to timeout_s seconds; True when the call completed.");
}

void BindServer(py::module_& m) {
  py::class_<ps::PsServer>(m, "Server", "A parameter server serving in background threads.")
      .def_static(
          "start",
          [](const py::bytes& config, const std::string& address, int64_t max_threads,
             const std::string& load_dirname, const std::string& job_id, bool worker_restarts,
             bool local_transport) {
            ps::ServerOptions options;
            options.local_transport = local_transport;
            options.load_dirname = load_dirname;
            options.job_id = job_id;
            options.worker_restarts = worker_restarts;
            options.config = ParseMessage<ps::proto::ServerConfig>(config, "ServerConfig");
            options.address = address;
            FLEET_ENFORCE(max_threads >= 2 && max_threads <= 65536, InvalidArgument,
                          "max_threads must be in [2, 65536], got ", max_threads);
            options.max_threads = static_cast<int>(max_threads);
            py::gil_scoped_release release;
            return ValueOrThrow(ps::PsServer::Start(options));
          },
          py::arg("config"), py::arg("address") = "127.0.0.1:0", py::arg("max_threads") = 256,
          py::arg("load_dirname") = "", py::arg("job_id") = "", py::arg("worker_restarts") = false,
          py::arg("local_transport") = false)
      .def_property_readonly("endpoint", &ps::PsServer::endpoint)
      .def_property_readonly("local_endpoint", &ps::PsServer::local_endpoint)
      .def("describe", &ps::PsServer::Describe)
      .def("request_stop", &ps::PsServer::RequestStop, py::call_guard<py::gil_scoped_release>())
      .def(
          "wait_for_stop_request",
          [](ps::PsServer& s, double timeout_s) {
            const absl::Duration timeout = Seconds(timeout_s, "timeout_s", true);
            py::gil_scoped_release release;
            return s.WaitForStopRequest(timeout);
          },
          py::arg("timeout_s"))
      .def(
          "shutdown",
          [](ps::PsServer& s, double grace_s) {
            const absl::Duration grace = Seconds(grace_s, "grace_s", true);
            py::gil_scoped_release release;
            s.Shutdown(grace);
          },
          py::arg("grace_s") = 5.0);
}

std::optional<uint32_t> TableArg(const py::object& table_id) {
  if (table_id.is_none()) return std::nullopt;
  FLEET_ENFORCE(py::isinstance<py::int_>(table_id), InvalidArgument,
                "table_id must be an int or None, got ",
                py::str(py::type::handle_of(table_id)).cast<std::string>());
  return U32(table_id.cast<int64_t>(), "table_id");
}

void BindClientCalls(PyClientClass& c) {
  c.def(
       "pull_sparse_async",
       [](ps::PsClient& client, int64_t table_id, const py::array& keys, const py::array& out) {
         const uint32_t table = U32(table_id, "table_id");
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
          [](ps::PsClient& client, int64_t table_id, const py::array& keys, const py::array& grads,
             bool is_delta) {
            const uint32_t table = U32(table_id, "table_id");
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
          "push_pull_sparse_async",
          [](ps::PsClient& client, int64_t table_id, const py::array& keys, const py::array& grads,
             const py::array& out, bool is_delta) {
            const uint32_t table = U32(table_id, "table_id");
            auto k = ArraySpan<const int64_t>(keys, "keys", false);
            auto g = ArraySpan<const float>(grads, "grads", false);
            auto o = ArraySpan<float>(out, "out", true);
            // Keys and gradients are copied before this returns; `out` is written until the
            // future is done (MakeFuture keeps it alive).
            ps::Future f = [&] {
              py::gil_scoped_release release;
              return client.PushPullSparse(
                  table, k, g, o, is_delta ? ps::PushKind::kDelta : ps::PushKind::kGradient);
            }();
            return MakeFuture(std::move(f), out, py::none());
          },
          py::arg("table_id"), py::arg("keys"), py::arg("grads"), py::arg("out"),
          py::arg("is_delta") = false)
      .def(
          "pull_dense_async",
          [](ps::PsClient& client, int64_t table_id, const py::array& out) {
            const uint32_t table = U32(table_id, "table_id");
            auto o = ArraySpan<float>(out, "out", true);
            ps::Future f = [&] {
              py::gil_scoped_release release;
              return client.PullDense(table, o);
            }();
            return MakeFuture(std::move(f), out, py::none());
          },
          py::arg("table_id"), py::arg("out"))
      .def(
          "push_dense_async",
          [](ps::PsClient& client, int64_t table_id, const py::array& grads, bool is_delta) {
            const uint32_t table = U32(table_id, "table_id");
            auto g = ArraySpan<const float>(grads, "grads", false);
            // PushDense copies the gradients into its requests before returning.
            ps::Future f = [&] {
              py::gil_scoped_release release;
              return client.PushDense(table, g, is_delta);
            }();
            return MakeFuture(std::move(f), py::none(), py::none());
          },
          py::arg("table_id"), py::arg("grads"), py::arg("is_delta") = false)
      .def(
          "push_pull_dense_async",
          [](ps::PsClient& client, int64_t table_id, const py::array& grads, const py::array& out) {
            const uint32_t table = U32(table_id, "table_id");
            auto g = ArraySpan<const float>(grads, "grads", false);
            auto o = ArraySpan<float>(out, "out", true);
            // The gradients are copied into the requests before this returns; `out` is written
            // until the future is done (MakeFuture keeps it alive).
            ps::Future f = [&] {
              py::gil_scoped_release release;
              return client.PushPullDense(table, g, o);
            }();
            return MakeFuture(std::move(f), out, py::none());
          },
          py::arg("table_id"), py::arg("grads"), py::arg("out"))
      .def(
          "barrier_async",
          [](ps::PsClient& client, const std::string& name, int64_t num_workers, int64_t worker_id,
             double timeout_s) {
            const uint32_t workers = U32(num_workers, "num_workers");
            const uint32_t worker = U32(worker_id, "worker_id");
            const absl::Duration timeout = Seconds(timeout_s, "timeout_s");
            ps::Future f = [&] {
              py::gil_scoped_release release;
              return client.Barrier(name, workers, worker, timeout);
            }();
            return MakeFuture(std::move(f), py::none(), py::none());
          },
          py::arg("name"), py::arg("num_workers"), py::arg("worker_id"), py::arg("timeout_s"))
      .def(
          "sync_step_and_pull_dense",
          [](ps::PsClient& client, int64_t table_id, const py::array& grads, const py::array& out,
             int64_t num_workers, int64_t worker_id, double timeout_s) {
            const uint32_t table = U32(table_id, "table_id");
            const uint32_t workers = U32(num_workers, "num_workers");
            const uint32_t worker = U32(worker_id, "worker_id");
            const absl::Duration timeout = Seconds(timeout_s, "timeout_s");
            auto g = ArraySpan<const float>(grads, "grads", false);
            auto o = ArraySpan<float>(out, "out", true);
            absl::StatusOr<uint32_t> done;
            {
              py::gil_scoped_release release;
              // As a sync worker's communicator: the accumulate push and the step in flight
              // together; the step returns once the push has ended too.
              const ps::Future push = client.PushDense(table, g, ps::PushKind::kAccumulate);
              done = client.SyncStepAndPullDense(workers, worker, timeout, table, o, {&push, 1});
            }
            ThrowIfError(done.status());
            return *done;
          },
          py::arg("table_id"), py::arg("grads"), py::arg("out"), py::arg("num_workers"),
          py::arg("worker_id"), py::arg("timeout_s"),
          "A sync worker's dense step: `grads` as an accumulate push and the step barrier, sent "
          "together; `out` gets the table after the step's update. Returns how many workers "
          "have finished (none here: this call never says done).");
}

void BindClientAdmin(PyClientClass& c) {
  c.def(
       "save",
       [](ps::PsClient& client, const std::string& dirname, const py::object& table_id, bool delta,
          bool end_save_cycle, bool values_only) {
         auto table = TableArg(table_id);
         FLEET_ENFORCE(!(delta && values_only), InvalidArgument, "save to ", dirname,
                       ": a save is delta or values-only, not both");
         const ps::proto::SaveMode mode = delta         ? ps::proto::DELTA
                                          : values_only ? ps::proto::VALUES
                                                        : ps::proto::BASE;
         py::gil_scoped_release release;
         return ValueOrThrow(client.Save(dirname, table, mode, end_save_cycle));
       },
       py::arg("dirname"), py::arg("table_id") = py::none(), py::arg("delta") = false,
       py::arg("end_save_cycle") = true, py::arg("values_only") = false)
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
          [](ps::PsClient& client, int64_t table_id, int64_t max_unseen_saves) {
            const uint32_t table = U32(table_id, "table_id");
            const uint32_t saves = U32(max_unseen_saves, "max_unseen_saves");
            absl::StatusOr<uint64_t> removed;
            {
              py::gil_scoped_release release;
              removed = client.Shrink(table, saves);
            }
            return ValueOrThrow(std::move(removed));
          },
          py::arg("table_id"), py::arg("max_unseen_saves"))
      .def("stats",
           [](ps::PsClient& client) {
             absl::StatusOr<std::vector<std::vector<ps::proto::TableStats>>> stats;
             {
               py::gil_scoped_release release;
               stats = client.Stats();
             }
             return ValueOrThrow(std::move(stats));  // lists of _core.ps.TableStats
           })
      .def("heartbeat",
           [](ps::PsClient& client) {
             py::gil_scoped_release release;
             ThrowIfError(client.Heartbeat());
           })
      .def("stop_servers",
           [](ps::PsClient& client) {
             absl::Status status;
             {
               py::gil_scoped_release release;
               status = client.StopServers();
             }
             ThrowIfError(status);
           })
      .def("close", &ps::PsClient::Close, py::call_guard<py::gil_scoped_release>(),
           "Refuses later calls and waits for the calls in flight.");
}

void BindClient(py::module_& m) {
  PyClientClass c(m, "Client", "A worker's connection to every parameter server.");
  c.def(py::init([](const std::vector<std::string>& endpoints, double connect_timeout_s,
                    double rpc_timeout_s, double admin_timeout_s, int64_t max_keys_per_request,
                    const std::string& job_id, bool server_restarts, const std::string& local_host,
                    bool local_socket, bool local_shared_memory) {
          ps::ClientOptions options;
          options.local_host = local_host;
          options.local_socket = local_socket;
          options.local_shared_memory = local_shared_memory;
          options.job_id = job_id;
          options.server_restarts = server_restarts;
          options.endpoints = endpoints;
          options.connect_timeout = Seconds(connect_timeout_s, "connect_timeout");
          options.rpc_timeout = Seconds(rpc_timeout_s, "rpc_timeout");
          options.admin_timeout = Seconds(admin_timeout_s, "admin_timeout");
          options.max_keys_per_request = Count(max_keys_per_request, "max_keys_per_request");
          py::gil_scoped_release release;
          return std::shared_ptr<ps::PsClient>(
              ValueOrThrow(ps::PsClient::Connect(std::move(options))));
        }),
        py::arg("endpoints"), py::arg("connect_timeout_s") = 10.0, py::arg("rpc_timeout_s") = 30.0,
        py::arg("admin_timeout_s") = 600.0, py::arg("max_keys_per_request") = 32768,
        py::arg("job_id") = "", py::arg("server_restarts") = false, py::arg("local_host") = "",
        py::arg("local_socket") = true, py::arg("local_shared_memory") = false)
      .def_property_readonly("endpoints", &ps::PsClient::endpoints)
      .def(
          "shared_memory",
          [](const ps::PsClient& client, int64_t server) {
            FLEET_ENFORCE(server >= 0 && static_cast<size_t>(server) < client.endpoints().size(),
                          InvalidArgument, "server ", server, " is not below the ",
                          client.endpoints().size(), " servers of this client");
            return client.shared_memory(static_cast<size_t>(server));
          },
          py::arg("server"),
          "Whether the dense floats to `server` go through memory shared with it.")
      .def(
          "target",
          [](const ps::PsClient& client, int64_t server) {
            FLEET_ENFORCE(server >= 0 && static_cast<size_t>(server) < client.endpoints().size(),
                          InvalidArgument, "server ", server, " is not below the ",
                          client.endpoints().size(), " servers of this client");
            return client.target(static_cast<size_t>(server));
          },
          py::arg("server"),
          "The gRPC target the calls to `server` go to: its endpoint, or its local transport.")
      .def(
          "table_config",
          [](const ps::PsClient& client, int64_t table_id) {
            return py::bytes(
                ValueOrThrow(client.Table(U32(table_id, "table_id"))).SerializeAsString());
          },
          py::arg("table_id"), "The serialised TableConfig the servers reported.");
  BindClientCalls(c);
  BindClientAdmin(c);
}

}  // namespace

void BindPs(py::module_& m) {
  py::module_ ps = m.def_submodule("ps", "Parameter server engine (private; use fleet.ps)");
  BindFuture(ps);
  BindServer(ps);
  BindClient(ps);
  BindPsTables(ps);
  py::class_<ps::AllocatorTuning>(ps, "AllocatorTuning",
                                  "What tune_allocator_for_serving applied (serving_allocator.h)")
      .def_readonly("applied", &ps::AllocatorTuning::applied)
      .def_readonly("mmap_threshold", &ps::AllocatorTuning::mmap_threshold)
      .def_readonly("trim_threshold", &ps::AllocatorTuning::trim_threshold)
      .def_readonly("arena_max", &ps::AllocatorTuning::arena_max)
      .def("__repr__", [](const ps::AllocatorTuning& t) {
        return absl::StrCat("AllocatorTuning(applied=", t.applied ? "True" : "False",
                            ", mmap_threshold=", t.mmap_threshold,
                            ", trim_threshold=", t.trim_threshold, ", arena_max=", t.arena_max,
                            ")");
      });
  ps.def("tune_allocator_for_serving", &ps::TuneAllocatorForServing,
         py::arg("memory_bounded") = false,
         "Keeps large freed buffers in the heap for reuse instead of unmapping them (glibc), so "
         "that requests do not fault their buffers in again; process-wide, for server processes. "
         "memory_bounded (a server of a table with a memory budget) also caps malloc arenas; "
         "call it before the server starts its threads. Returns what was applied.");
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
}

}  // namespace fleet::python
