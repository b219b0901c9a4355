// Python view of the distributed layer (`_core.distributed`): the worker's PS communicator, made
// from the typed CommunicatorConfig that fleet/ps/runtime.py fills from the PS pass's plan and the
// strategy, and attached to the RuntimeResources every fleet.Executor reads.

#include <pybind11/stl.h>

#include <optional>

#include "core/status.h"
#include "core/timeout.h"
#include "distributed/communicator.h"
#include "python/bindings.h"

namespace fleet::python {
namespace {

using distributed::Communicator;
using distributed::CommunicatorConfig;
using distributed::DenseVar;
using distributed::PsMode;
using distributed::SparseVar;

void BindConfig(py::module_& d) {
  py::enum_<PsMode>(d, "PsMode", "The communicator modes (communicator.h)")
      .value("SYNC", PsMode::kSync)
      .value("HALF_ASYNC", PsMode::kHalfAsync)
      .value("ASYNC", PsMode::kAsync)
      .value("GEO", PsMode::kGeo);

  py::class_<DenseVar>(d, "DenseVar", "A dense parameter's place in the packed dense table")
      .def(py::init([](std::string param, std::string grad, size_t offset, size_t numel) {
             return DenseVar{std::move(param), std::move(grad), offset, numel};
           }),
           py::arg("param"), py::arg("grad"), py::arg("offset"), py::arg("numel"))
      .def_readwrite("param", &DenseVar::param)
      .def_readwrite("grad", &DenseVar::grad)
      .def_readwrite("offset", &DenseVar::offset)
      .def_readwrite("numel", &DenseVar::numel);

  py::class_<SparseVar>(d, "SparseVar", "A sparse table the worker pulls from and pushes to")
      .def(py::init([](uint32_t table_id, size_t dim, std::string name,
                       std::vector<std::string> ids, const py::bytes& local_rule) {
             SparseVar var{table_id, dim, std::move(name), std::move(ids), {}};
             FLEET_ENFORCE(var.local_rule.ParseFromString(std::string(local_rule)), InvalidArgument,
                           "SparseVar: cannot parse the local optimizer config of '", var.name,
                           "'");
             return var;
           }),
           py::arg("table_id"), py::arg("dim"), py::arg("name"),
           py::arg("ids") = std::vector<std::string>{}, py::arg("local_rule") = py::bytes(),
           "`ids`: the pull_sparse op's Ids variables (async prefetch); `local_rule`: the "
           "serialised OptimizerConfig a GEO worker applies to its own rows.")
      .def_readonly("table_id", &SparseVar::table_id)
      .def_readonly("dim", &SparseVar::dim)
      .def_readonly("name", &SparseVar::name)
      .def_readonly("ids", &SparseVar::ids);

  py::class_<CommunicatorConfig>(d, "CommunicatorConfig",
                                 "A communicator's settings (csrc/distributed/communicator.h)")
      .def(py::init<>())
      .def_readwrite("mode", &CommunicatorConfig::mode)
      .def_readwrite("worker_id", &CommunicatorConfig::worker_id)
      .def_readwrite("num_workers", &CommunicatorConfig::num_workers)
      .def_readwrite("dense_table_id", &CommunicatorConfig::dense_table_id)
      .def_readwrite("dense", &CommunicatorConfig::dense)
      .def_readwrite("sparse", &CommunicatorConfig::sparse)
      .def_readwrite("send_queue_size", &CommunicatorConfig::send_queue_size)
      .def_readwrite("max_merge_var_num", &CommunicatorConfig::max_merge_var_num)
      .def_readwrite("send_wait_times", &CommunicatorConfig::send_wait_times)
      .def_readwrite("thread_pool_size", &CommunicatorConfig::thread_pool_size)
      .def_readwrite("independent_recv", &CommunicatorConfig::independent_recv)
      .def_readwrite("max_dense_staleness", &CommunicatorConfig::max_dense_staleness)
      .def_readwrite("prefetch_sparse", &CommunicatorConfig::prefetch_sparse)
      .def_readwrite("max_sparse_staleness", &CommunicatorConfig::max_sparse_staleness)
      .def_readwrite("geo_steps", &CommunicatorConfig::geo_steps)
      .def_property(
          "step_timeout_s",
          [](const CommunicatorConfig& c) { return absl::ToDoubleSeconds(c.step_timeout); },
          [](CommunicatorConfig& c, double seconds) {
            c.step_timeout = ValueOrThrow(TimeoutFromSeconds(seconds, "step_timeout"));
          });
}

}  // namespace

void BindDistributed(py::module_& m) {
  py::module_ d = m.def_submodule("distributed", "Communicators of parameter-server training");
  BindConfig(d);
  py::class_<Communicator, std::shared_ptr<Communicator>>(
      d, "Communicator", "A worker's PS communicator (see csrc/distributed/communicator.h).")
      .def(py::init(
               [](CommunicatorConfig config, std::shared_ptr<ps::PsClient> client, Scope* root) {
                 return distributed::MakeCommunicator(std::move(config), std::move(client), root);
               }),
           py::arg("config"), py::arg("client"), py::arg("root_scope"), py::keep_alive<1, 4>())
      .def_property_readonly("mode",
                             [](const Communicator& c) { return PsModeName(c.config().mode); })
      .def_property_readonly("prefetched_pulls", &distributed::PrefetchedPulls,
                             "pull_sparse calls served from rows prefetched while the step "
                             "before ran (async dataset passes)")
      .def_property_readonly(
          "trainer_waits",
          [](const Communicator& c) {
            const distributed::TrainerWaits w = distributed::AsyncTrainerWaits(c);
            py::dict d;
            d["dense_refresh"] = w.dense_refresh;
            d["sparse_prefetch"] = w.sparse_prefetch;
            d["sparse_pull"] = w.sparse_pull;
            d["send_queue_full"] = w.send_queue_full;
            return d;
          },
          "What the trainer threads waited for in their steps (async; zeros otherwise), as "
          "counts of calls that blocked: dense_refresh (a step's start, for dense values with "
          "its own gradients but the last max_dense_staleness), sparse_prefetch (a prefetched "
          "pull not arrived yet), sparse_pull (pulls of the servers at the step), "
          "send_queue_full (a gradient waiting for room in its send queue)")
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
            for (auto& hook : c->hooks()) resources.AddStepHook(std::move(hook));
          },
          py::arg("resources"), "Makes this the communicator the resources' kernels reach.")
      .def(
          "detach",
          [](const std::shared_ptr<Communicator>& c, framework::RuntimeResources& resources) {
            if (resources.Find<Communicator>() == c.get()) resources.Remove<Communicator>();
            for (const auto& hook : c->hooks()) resources.RemoveStepHook(hook.get());
          },
          py::arg("resources"));
}

}  // namespace fleet::python
