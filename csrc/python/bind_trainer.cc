// train_from_dataset's driver: `_core.Executor.run_from_dataset` runs one pass of a dataset
// through a prepared program with N trainer threads on the executor it is called on (its seed,
// profile, resources and step hooks). Python waits with the GIL released; progress lines call
// back into Python holding the GIL only for the call.

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "python/numpy_convert.h"
#include "python/py_executor.h"
#include "trainer/multi_trainer.h"

namespace fleet::python {
namespace {

void BindResult(py::module_& m) {
  using framework::RunStats;
  using trainer::TrainerResult;
  // Op times by role, summed over the trainer threads (filled when the pass is profiled).
  py::class_<RunStats>(m, "RunStats", "Op times of a pass by role, in seconds")
      .def_property_readonly("forward_s",
                             [](const RunStats& s) { return s.nanos_by_role[0] * 1e-9; })
      .def_property_readonly("backward_s",
                             [](const RunStats& s) { return s.nanos_by_role[1] * 1e-9; })
      .def_property_readonly("optimize_s",
                             [](const RunStats& s) { return s.nanos_by_role[2] * 1e-9; })
      .def_property_readonly("other_s", [](const RunStats& s) { return s.nanos_by_role[3] * 1e-9; })
      .def_readonly("runs", &RunStats::runs);
  py::class_<TrainerResult>(m, "TrainerResult",
                            "What one dataset pass did (csrc/trainer/multi_trainer.h)")
      .def_readonly("batches", &TrainerResult::batches)
      .def_readonly("samples", &TrainerResult::samples)
      .def_readonly("seconds", &TrainerResult::seconds)
      .def_readonly("read", &TrainerResult::read)
      .def_readonly("fetch_sums", &TrainerResult::fetch_sums)
      .def_readonly("profile", &TrainerResult::run_stats)
      .def_property_readonly(
          "last_fetch",
          [](const TrainerResult& r) {
            py::list last;  // a fetch variable no batch wrote is None
            for (const auto& t : r.last_fetch) {
              last.append(t.initialized() ? py::object(TensorToArray(t)) : py::object(py::none()));
            }
            return last;
          },
          "The fetch variables after the last batch to finish, as arrays (None: never written).")
      .def_property_readonly(
          "last_fetch_lod",
          [](const TrainerResult& r) {
            std::vector<LoD> lods;
            for (const auto& t : r.last_fetch) lods.push_back(t.lod());
            return lods;
          },
          "Their lod offsets.");
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
trainer::TrainerResult RunFromDataset(PyExecutor& executor, PyPrepared& prepared,
                                      py::object scope_obj, data::Dataset& dataset, int threads,
                                      std::vector<std::string> fetch_names,
                                      std::vector<std::string> fetch_labels, int64_t print_period,
                                      bool debug, uint64_t seed, const py::object& log) {
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
  return result;
}

}  // namespace

void BindTrainer(py::module_& m) {
  BindResult(m);
  auto cls = py::reinterpret_borrow<py::class_<PyExecutor>>(m.attr("Executor"));
  cls.def("run_from_dataset", &RunFromDataset, py::arg("prepared"), py::arg("scope"),
          py::arg("dataset"), py::arg("threads"), py::arg("fetch_names"), py::arg("fetch_labels"),
          py::arg("print_period"), py::arg("debug"), py::arg("seed"), py::arg("log"),
          "Runs a prepared program over one pass of the dataset with `threads` trainer threads "
          "on this executor (its resources and step hooks); returns its TrainerResult.");
}

}  // namespace fleet::python
