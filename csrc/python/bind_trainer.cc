// train_from_dataset's driver: `_core.Executor.run_from_dataset` runs one pass of a dataset
// through a prepared program with N trainer threads on the executor it is called on (its seed,
// profile, resources and step hooks). Python waits with the GIL released; progress lines call
// back into Python holding the GIL only for the call.

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "python/numpy_convert.h"
#include "python/py_executor.h"
#include "python/read_stats.h"
#include "trainer/multi_trainer.h"

namespace fleet::python {
namespace {

py::dict ResultToDict(const trainer::TrainerResult& r) {
  py::dict d;
  d["batches"] = r.batches;
  d["samples"] = r.samples;
  d["seconds"] = r.seconds;
  d["read"] = ReadStatsToDict(r.read);
  d["fetch_sums"] = r.fetch_sums;
  py::list last;
  for (const auto& t : r.last_fetch) {
    last.append(t.initialized() ? py::object(TensorToArray(t)) : py::object(py::none()));
  }
  d["last_fetch"] = last;
  py::list lods;
  for (const auto& t : r.last_fetch) lods.append(py::cast(t.lod()));
  d["last_fetch_lod"] = lods;
  const auto& ns = r.run_stats.nanos_by_role;
  py::dict profile;
  profile["forward_s"] = ns[0] * 1e-9;
  profile["backward_s"] = ns[1] * 1e-9;
  profile["optimize_s"] = ns[2] * 1e-9;
  profile["other_s"] = ns[3] * 1e-9;
  profile["runs"] = r.run_stats.runs;
  d["profile"] = profile;
  return d;
}

// Runs a Python callable from a C++ thread. An exception raised by it cannot travel back
// through the trainer threads, so it is reported as unraisable (printed) and dropped.
void CallPython(const py::object& fn, const std::string& line) {
  py::gil_scoped_acquire gil;
  try {
    fn(line);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("fleet train_from_dataset progress callback");
  }
}

// Adds the pass's op times to the executor's profile (Executor.profile() covers both drivers).
void AddStats(framework::RunStats* total, const framework::RunStats& pass) {
  for (size_t r = 0; r < pass.nanos_by_role.size(); ++r) {
    total->nanos_by_role[r] += pass.nanos_by_role[r];
  }
  total->runs += pass.runs;
}

// Runs one pass with the GIL released, waking every 100 ms to let Python handle signals
// (Ctrl-C cancels the pass: threads are joined and children killed before it propagates).
py::dict RunFromDataset(PyExecutor& executor, PyPrepared& prepared, py::object scope_obj,
                        data::Dataset& dataset, int threads, std::vector<std::string> fetch_names,
                        std::vector<std::string> fetch_labels, int64_t print_period, bool debug,
                        uint64_t seed, const py::object& log) {
  trainer::TrainerOptions options;
  options.threads = threads;
  options.fetch_names = std::move(fetch_names);
  options.fetch_labels = std::move(fetch_labels);
  options.print_period = print_period;
  options.debug = debug || executor.profiling();
  options.print_profile = debug;
  options.seed = seed;
  if (!log.is_none()) {
    options.log = [&log](const std::string& line) { CallPython(log, line); };
  }
  Scope* scope = scope_obj.cast<Scope*>();
  trainer::MultiTrainer trainer(&executor.executor(), &prepared.program(), scope,
                                std::move(options));
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  trainer::TrainerResult result;
  {
    py::gil_scoped_release release;
    trainer.Start(&dataset);
    while (!trainer.Wait(absl::Milliseconds(100))) {
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) {
        PyErr_Fetch(&type, &value, &trace);
        break;
      }
    }
    if (type != nullptr) {
      trainer.Cancel();
      try {
        trainer.Finish();
      } catch (const std::exception&) {  // the interrupt is what the user asked to see
      }
    } else {
      result = trainer.Finish();
    }
  }
  if (type != nullptr) {
    PyErr_Restore(type, value, trace);
    throw py::error_already_set();
  }
  if (executor.profiling()) AddStats(&executor.stats(), result.run_stats);
  return ResultToDict(result);
}

}  // namespace

void BindTrainer(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<PyExecutor>>(m.attr("Executor"));
  cls.def("run_from_dataset", &RunFromDataset, py::arg("prepared"), py::arg("scope"),
          py::arg("dataset"), py::arg("threads"), py::arg("fetch_names"), py::arg("fetch_labels"),
          py::arg("print_period"), py::arg("debug"), py::arg("seed"), py::arg("log"),
          "Runs a prepared program over one pass of the dataset with `threads` trainer threads "
          "on this executor (its resources and step hooks); returns counters, per-fetch sums "
          "and the last fetched values.");
}

}  // namespace fleet::python
