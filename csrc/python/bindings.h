#pragma once
// One Bind* function per area; module.cc calls them in order. Each lives in its own file.

#include <pybind11/pybind11.h>

namespace fleet::python {

namespace py = pybind11;

void BindErrors(py::module_& m);      // bind_errors.cc
void BindCore(py::module_& m);        // bind_core.cc: LoDTensor, SelectedRows, Variable, Scope
void BindFramework(py::module_& m);   // bind_framework.cc: registry, autodiff, Executor
void BindData(py::module_& m);        // bind_data.cc: datasets, train_from_dataset's trainer
void BindCuda(py::module_& m);        // bind_cuda.cc: CUDA devices, GPU optimizer updates
void BindCollective(py::module_& m);  // bind_collective.cc: stores, TCP store server, Gloo groups
void BindNccl(py::module_& m);        // bind_nccl.cc: NCCL backend availability, id exchange, group
void BindCollectiveRuntime(py::module_& m);  // bind_collective_runtime.cc: group, hooks
void BindPs(py::module_& m);            // bind_ps.cc: parameter server, client, tables (_core.ps)
void BindDistributed(py::module_& m);   // bind_distributed.cc: PS communicators
void BindDataParallel(py::module_& m);  // bind_data_parallel.cc: one-process data parallelism
void BindMonitoring(py::module_& m);    // bind_monitoring.cc: counters for live metrics
void BindCrashReport(py::module_& m);   // bind_crash_report.cc: the native crash report

}  // namespace fleet::python
