#pragma once
// ReadStats (what a dataset's readers did) as a Python dict; for bind_data.cc and
// bind_trainer.cc.

#include <pybind11/stl.h>

#include "data/dataset.h"
#include "python/bindings.h"

namespace fleet::python {

inline py::dict ReadStatsToDict(const data::ReadStats& stats) {
  py::dict d;
  d["files"] = stats.files;
  d["lines"] = stats.lines;
  d["samples"] = stats.samples;
  d["bad_lines"] = stats.bad_lines;
  d["bytes"] = stats.bytes;
  d["bad_line_examples"] = stats.bad_line_examples;
  d["interrupted"] = stats.interrupted;
  return d;
}

}  // namespace fleet::python
