// Python view of the distributed layer (`_core.distributed`): the worker's PS communicator,
// made from the typed config that fleet/ps/runtime.py builds from the rewritten program and the
// strategy, and attached to the RuntimeResources every fleet.Executor reads.

#include <pybind11/stl.h>

#include <optional>

#include "distributed/communicator.h"
#include "python/bindings.h"

namespace fleet::python {
namespace {

using distributed::Communicator;
using distributed::CommunicatorConfig;
using distributed::PsMode;

// (param, grad, offset, numel) and (table_id, dim, name, serialised local OptimizerConfig).
using PyDenseVar = std::tuple<std::string, std::string, size_t, size_t>;
using PySparseVar = std::tuple<uint32_t, size_t, std::string, py::bytes>;

PsMode ParseMode(const std::string& mode) {
  if (mode == "sync") return PsMode::kSync;
  if (mode == "half_async") return PsMode::kHalfAsync;
  if (mode == "async") return PsMode::kAsync;
  if (mode == "geo") return PsMode::kGeo;
  throw InvalidArgument("unknown parameter-server mode '" + mode +
                        "'; valid: sync, half_async, async, geo");
}

std::shared_ptr<Communicator> Make(const std::string& mode, uint32_t worker_id,
                                   uint32_t num_workers, std::optional<uint32_t> dense_table_id,
                                   const std::vector<PyDenseVar>& dense,
                                   const std::vector<PySparseVar>& sparse, size_t send_queue_size,
                                   size_t max_merge_var_num, int send_wait_times,
                                   int thread_pool_size, bool independent_recv,
                                   int max_dense_staleness, bool prefetch_sparse, int64_t geo_steps,
                                   double step_timeout_s, std::shared_ptr<ps::PsClient> client,
                                   py::object root) {
  FLEET_ENFORCE(step_timeout_s > 0, InvalidArgument,
                "communicator: step_timeout must be positive seconds, got ", step_timeout_s);
  CommunicatorConfig config;
  config.mode = ParseMode(mode);
  config.worker_id = worker_id;
  config.num_workers = num_workers;
  config.dense_table_id = dense_table_id;
  for (const auto& [param, grad, offset, numel] : dense) {
    config.dense.push_back({param, grad, offset, numel});
  }
  for (const auto& [table_id, dim, name, rule] : sparse) {
    distributed::SparseVar var{table_id, dim, name, {}};
    FLEET_ENFORCE(var.local_rule.ParseFromString(std::string(rule)), InvalidArgument,
                  "communicator: cannot parse the local optimizer config of '", name, "'");
    config.sparse.push_back(std::move(var));
  }
  config.send_queue_size = send_queue_size;
  config.max_merge_var_num = max_merge_var_num;
  config.send_wait_times = send_wait_times;
  config.thread_pool_size = thread_pool_size;
  config.independent_recv = independent_recv;
  config.max_dense_staleness = max_dense_staleness;
  config.prefetch_sparse = prefetch_sparse;
  config.geo_steps = geo_steps;
  config.step_timeout = absl::Seconds(step_timeout_s);
  Scope* scope = root.cast<Scope*>();
  return distributed::MakeCommunicator(std::move(config), std::move(client), scope);
}

}  // namespace

void BindDistributed(py::module_& m) {
  py::module_ d = m.def_submodule("distributed", "Communicators of parameter-server training");
  py::class_<Communicator, std::shared_ptr<Communicator>>(
      d, "Communicator", "A worker's PS communicator (see csrc/distributed/communicator.h).")
      .def(py::init(&Make), py::arg("mode"), py::arg("worker_id"), py::arg("num_workers"),
           py::arg("dense_table_id"), py::arg("dense"), py::arg("sparse"),
           py::arg("send_queue_size"), py::arg("max_merge_var_num"), py::arg("send_wait_times"),
           py::arg("thread_pool_size"), py::arg("independent_recv"), py::arg("max_dense_staleness"),
           py::arg("prefetch_sparse"), py::arg("geo_steps"), py::arg("step_timeout_s"),
           py::arg("client"), py::arg("root_scope"), py::keep_alive<1, 18>())
      .def_property_readonly("mode",
                             [](const Communicator& c) { return PsModeName(c.config().mode); })
      .def_property_readonly("prefetched_pulls", &Communicator::prefetched_pulls,
                             "pull_sparse calls served from rows prefetched while the step "
                             "before ran (async dataset passes)")
      .def("start", &Communicator::Start, py::call_guard<py::gil_scoped_release>(),
           "Offers worker 0's dense start values, waits for every worker, pulls the dense "
           "values, starts the background threads.")
      .def("flush", &Communicator::Flush, py::call_guard<py::gil_scoped_release>(),
           "Pushes every pending gradient and waits for it.")
      .def("stop", &Communicator::Stop, py::call_guard<py::gil_scoped_release>())
      .def(
          "attach",
          [](const std::shared_ptr<Communicator>& c, framework::RuntimeResources& resources) {
            resources.Set<Communicator>(c);
            resources.AddStepHook(c->hook());
          },
          py::arg("resources"), "Makes this the communicator the resources' kernels reach.")
      .def(
          "detach",
          [](const std::shared_ptr<Communicator>& c, framework::RuntimeResources& resources) {
            if (resources.Find<Communicator>() == c.get()) resources.Remove<Communicator>();
            resources.RemoveStepHook(c->hook().get());
          },
          py::arg("resources"));
}

}  // namespace fleet::python
