// Counters for live metrics (`_core.monitoring`), read by fleet/monitoring when Prometheus
// scrapes: the step meter a worker's executors run as a step hook, the RPC meters of a client
// and a server, and a server's table statistics. Snapshots are copies; nothing here blocks on
// training.

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "framework/runtime.h"
#include "framework/step_meter.h"
#include "ps/client/client.h"
#include "ps/rpc_meter.h"
#include "ps/server/server.h"
#include "python/bindings.h"

namespace fleet::python {
namespace {

using framework::StepMeter;
using framework::StepMeterSnapshot;

void BindRpcMeter(py::module_& m) {
  py::class_<ps::RpcErrorCount>(m, "RpcErrorCount", "Failed calls of one status code.")
      .def_readonly("code", &ps::RpcErrorCount::code)
      .def_readonly("count", &ps::RpcErrorCount::count);
  py::class_<ps::RpcKindCounts>(m, "RpcKindCounts", "One kind of RPC's counters (rpc_meter.h).")
      .def_readonly("kind", &ps::RpcKindCounts::kind)
      .def_readonly("calls", &ps::RpcKindCounts::calls)
      .def_readonly("bytes_sent", &ps::RpcKindCounts::bytes_sent)
      .def_readonly("bytes_received", &ps::RpcKindCounts::bytes_received)
      .def_readonly("latency_sum_seconds", &ps::RpcKindCounts::latency_sum_seconds)
      .def_readonly("latency_buckets", &ps::RpcKindCounts::latency_buckets,
                    "calls per bucket of latency_bounds, not cumulative; the last is +Inf")
      .def_readonly("errors", &ps::RpcKindCounts::errors);
  py::class_<ps::RpcMeterSnapshot>(m, "RpcMeterSnapshot", "A client's or server's RPC counters.")
      .def_readonly("latency_bounds", &ps::RpcMeterSnapshot::latency_bounds)
      .def_readonly("kinds", &ps::RpcMeterSnapshot::kinds)
      .def_readonly("in_flight", &ps::RpcMeterSnapshot::in_flight);

  m.def(
      "client_rpcs", [](const ps::PsClient& client) { return client.rpc_meter().Snapshot(); },
      py::arg("client"), "The RPCs a _core.ps.Client made so far (each attempt once).");
  m.def(
      "server_rpcs", [](const ps::PsServer& server) { return server.rpc_meter().Snapshot(); },
      py::arg("server"), "The pulls and pushes a _core.ps.Server served so far.");
  m.def("server_tables", &ps::PsServer::TableStats, py::arg("server"),
        py::call_guard<py::gil_scoped_release>(),
        "Each table's statistics on a _core.ps.Server (list of _core.ps.TableStats).");
}

void BindStepMeter(py::module_& m) {
  py::class_<StepMeterSnapshot>(m, "StepMeterSnapshot", "What a StepMeter counted so far.")
      .def_readonly("steps", &StepMeterSnapshot::steps)
      .def_readonly("samples", &StepMeterSnapshot::samples)
      .def_readonly("step_seconds_sum", &StepMeterSnapshot::step_seconds_sum)
      .def_readonly("step_time_bounds", &StepMeterSnapshot::step_time_bounds)
      .def_readonly("step_time_buckets", &StepMeterSnapshot::step_time_buckets,
                    "steps per bucket of step_time_bounds, not cumulative; the last is +Inf");
  py::class_<StepMeter, std::shared_ptr<StepMeter>>(
      m, "StepMeter", "Counts steps, samples and step times as a step hook (step_meter.h).")
      .def(py::init<std::vector<std::string>>(),
           py::arg("sample_vars") = std::vector<std::string>())
      .def("set_sample_vars", &StepMeter::SetSampleVars, py::arg("sample_vars"),
           "The variables whose batch size is a step's samples (the first found); between runs.")
      .def("snapshot", &StepMeter::Snapshot)
      .def(
          "attach",
          [](const std::shared_ptr<StepMeter>& meter, framework::RuntimeResources& resources) {
            resources.AddStepHook(meter);
          },
          py::arg("resources"), "Counts the steps of the executors that see `resources`.")
      .def(
          "detach",
          [](const std::shared_ptr<StepMeter>& meter, framework::RuntimeResources& resources) {
            resources.RemoveStepHook(meter.get());
          },
          py::arg("resources"));
}

}  // namespace

void BindMonitoring(py::module_& m) {
  py::module_ monitoring = m.def_submodule("monitoring", "Counters for live metrics");
  BindRpcMeter(monitoring);
  BindStepMeter(monitoring);
}

}  // namespace fleet::python
