#pragma once
// data::ReadStats (what a dataset's readers did) as the Python class `_core.ReadStats`, bound by
// bind_data.cc and returned by load_into_memory and in the results of dataset passes
// (bind_trainer.cc, bind_data_parallel.cc).

#include "data/dataset.h"
#include "python/bindings.h"

namespace fleet::python {

void BindReadStats(py::module_& m);

}  // namespace fleet::python
