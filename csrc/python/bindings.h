#pragma once
// One Bind* function per area; module.cc calls them in order. Each lives in its own file.

#include <pybind11/pybind11.h>

namespace fleet::python {

namespace py = pybind11;

void BindErrors(py::module_& m);     // bind_errors.cc
void BindCore(py::module_& m);       // bind_core.cc: LoDTensor, SelectedRows, Variable, Scope
void BindFramework(py::module_& m);  // bind_framework.cc: registry, autodiff, Executor
void BindPs(py::module_& m);         // bind_ps.cc: parameter server, client, tables (_core.ps)

}  // namespace fleet::python
