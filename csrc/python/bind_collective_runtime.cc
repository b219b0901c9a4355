// Python view of the collective training runtime: the process's CollectiveGroup (put into an
// executor's RuntimeResources for the c_* ops to find), the liveness listener that lets peers name
// a dead rank, and the gradient-merge step hook. fleet/collective/runtime.py drives these.

#include <pybind11/stl.h>

#include "collective/gloo_backend.h"
#include "collective/liveness.h"
#include "distributed/collective_group.h"
#include "distributed/collective_runtime.h"
#include "distributed/gradient_merge.h"
#include "python/bindings.h"

namespace fleet::python {
namespace {

using distributed::CollectiveGroup;
using distributed::GradientMergeHook;
using framework::RuntimeResources;

collective::Duration FromSeconds(double seconds, const char* what) {
  FLEET_ENFORCE(seconds > 0, InvalidArgument, what, " must be positive, got ", seconds, " s");
  return collective::Duration(static_cast<int64_t>(seconds * 1000.0));
}

void BindGroup(py::module_& m) {
  py::class_<distributed::OverlapStats>(
      m, "OverlapStats", "Times of the bucketed all-reduces since the last reset (seconds)")
      .def_readonly("buckets", &distributed::OverlapStats::buckets)
      .def_readonly("bytes", &distributed::OverlapStats::bytes)
      .def_readonly("comm_seconds", &distributed::OverlapStats::comm_seconds)
      .def_readonly("exposed_seconds", &distributed::OverlapStats::exposed_seconds);
  py::class_<CollectiveGroup, std::shared_ptr<CollectiveGroup>>(
      m, "CollectiveGroup",
      "The group the collective ops of a program run in (csrc/distributed/collective_group.h)")
      .def_static(
          "connect_gloo",
          [](std::shared_ptr<collective::Store> store, int rank, int size,
             const std::string& hostname, const std::string& name, double timeout_s,
             double collective_timeout_s, std::vector<std::string> rank_endpoints) {
            collective::GlooOptions gloo{hostname, name, FromSeconds(timeout_s, "timeout_s")};
            // The group names gone ranks by their job endpoints itself (collective_group.h).
            gloo.name_gone_ranks = rank_endpoints.empty();
            gloo.rank_addresses = rank_endpoints;
            distributed::CollectiveGroupOptions options;
            options.timeout = FromSeconds(collective_timeout_s, "collective_timeout_s");
            options.rank_endpoints = std::move(rank_endpoints);
            py::gil_scoped_release release;
            std::shared_ptr<collective::CollectiveBackend> backend =
                collective::GlooBackend::Connect(store.get(), rank, size, gloo);
            return std::make_shared<CollectiveGroup>(std::move(backend), std::move(options));
          },
          py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("hostname") = "127.0.0.1",
          py::arg("name") = "collective", py::arg("timeout_s") = 120.0,
          py::arg("collective_timeout_s") = 1800.0,
          py::arg("rank_endpoints") = std::vector<std::string>{},
          "Joins a Gloo group (a rendezvous of all ranks, bounded by timeout_s).")
      .def_property_readonly("rank", &CollectiveGroup::rank)
      .def_property_readonly("size", &CollectiveGroup::size)
      .def_property_readonly("name", &CollectiveGroup::name)
      .def("overlap_stats", &CollectiveGroup::overlap_stats)
      .def("reset_overlap_stats", &CollectiveGroup::ResetOverlapStats)
      .def(
          "attach",
          [](std::shared_ptr<CollectiveGroup> g, RuntimeResources& resources) {
            // A trainer thread logs through Python's logging (the GIL is free during a pass).
            distributed::AttachCollectiveGroup(resources, std::move(g), [](std::string message) {
              py::gil_scoped_acquire gil;
              py::module_::import("logging")
                  .attr("getLogger")("fleet.collective")
                  .attr("warning")(message);
            });
          },
          py::arg("resources"),
          "Makes this the group of every executor holding `resources` (between runs only).");
  m.def("detach_collective_group", &distributed::DetachCollectiveGroup, py::arg("resources"),
        "Drops the collective group and its step hooks from `resources`.");
}

void BindHelpers(py::module_& m) {
  py::class_<collective::LivenessListener, std::shared_ptr<collective::LivenessListener>>(
      m, "LivenessListener", "Listens on this rank's endpoint so peers can tell it is alive")
      .def(py::init<std::string, int>(), py::arg("host"), py::arg("port"))
      .def_property_readonly("port", &collective::LivenessListener::port);

  py::class_<GradientMergeHook, std::shared_ptr<GradientMergeHook>>(
      m, "GradientMergeHook", "Runs a program's apply block every k steps (gradient_merge.h)")
      .def(py::init([](const py::bytes& program_bytes, int apply_block, std::string step_var,
                       int k_steps, std::shared_ptr<CollectiveGroup> group) {
             framework::proto::ProgramDesc program;
             FLEET_ENFORCE(program.ParseFromString(std::string(program_bytes)), InvalidArgument,
                           "GradientMergeHook: cannot parse the serialised ProgramDesc");
             auto* registry = py::module_::import("fleet._core")
                                  .attr("op_registry")
                                  .cast<const framework::OpRegistry*>();
             distributed::GradientMergeOptions options{apply_block, std::move(step_var), k_steps};
             return std::make_shared<GradientMergeHook>(registry, program, std::move(options),
                                                        std::move(group));
           }),
           py::arg("program_desc"), py::arg("apply_block"), py::arg("step_var"), py::arg("k_steps"),
           py::arg("group") = nullptr)
      .def_property_readonly("applied", &GradientMergeHook::applied)
      .def(
          "attach",
          [](std::shared_ptr<GradientMergeHook> hook, RuntimeResources& resources) {
            resources.AddStepHook(std::move(hook));
          },
          py::arg("resources"))
      .def(
          "detach",
          [](const GradientMergeHook& hook, RuntimeResources& resources) {
            resources.RemoveStepHook(&hook);
          },
          py::arg("resources"));
}

}  // namespace

void BindCollectiveRuntime(py::module_& m) {
  BindGroup(m);
  BindHelpers(m);
}

}  // namespace fleet::python
