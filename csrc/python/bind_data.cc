// Python view of the data area: datasets and the multi-threaded trainer behind
// train_from_dataset. Every blocking call releases the GIL; progress lines and the global
// shuffle's exchange call back into Python holding the GIL only for the call.

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "data/dataset.h"
#include "data/multi_trainer.h"
#include "python/numpy_convert.h"

namespace fleet::python {
namespace {

using data::DataFeedConfig;
using data::Dataset;
using data::InMemoryDataset;
using data::QueueDataset;
using data::ReadStats;

// (name, dtype number, lod_level, shape) per used variable, in line order.
using PySlot = std::tuple<std::string, int, int, Shape>;

// Reader warnings become Python warnings (RuntimeWarning), raised from the reader thread with
// the GIL held for the call only.
void WarnInPython(const std::string& message) {
  py::gil_scoped_acquire gil;
  if (PyErr_WarnEx(PyExc_RuntimeWarning, message.c_str(), 1) != 0) {
    // A warnings filter set to "error": there is no caller to raise to from this thread.
    py::error_already_set e;
    e.discard_as_unraisable("fleet dataset reader warning");
  }
}

DataFeedConfig MakeConfig(const std::vector<PySlot>& slots, int64_t batch_size, int threads,
                          const std::string& pipe_command, bool skip_bad_lines,
                          double pipe_command_timeout_s) {
  DataFeedConfig config;
  for (const auto& [name, dtype, lod_level, shape] : slots) {
    config.slots.push_back(
        data::MakeSlotSpec(name, DTypeFromInt(dtype, name), lod_level, shape));
  }
  config.batch_size = batch_size;
  config.threads = threads;
  config.pipe_command = pipe_command;
  config.skip_bad_lines = skip_bad_lines;
  FLEET_ENFORCE(pipe_command_timeout_s > 0 && pipe_command_timeout_s < 1e9, InvalidArgument,
                "pipe_command timeout must be a positive number of seconds, got ",
                pipe_command_timeout_s);
  config.pipe_idle_timeout = std::chrono::milliseconds(
      std::max<int64_t>(1, static_cast<int64_t>(pipe_command_timeout_s * 1000.0)));
  config.warn = WarnInPython;
  return config;
}

py::dict StatsToDict(const ReadStats& stats) {
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

py::dict ResultToDict(const data::TrainerResult& r) {
  py::dict d;
  d["batches"] = r.batches;
  d["samples"] = r.samples;
  d["seconds"] = r.seconds;
  d["read"] = StatsToDict(r.read);
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

// Runs one pass with the GIL released, waking every 100 ms to let Python handle signals
// (Ctrl-C cancels the pass: threads are joined and children killed before it propagates).
py::dict RunPass(const framework::Executor& executor, const py::bytes& program_bytes,
                 Scope* scope, Dataset* dataset, data::TrainerOptions options,
                 const py::object& log) {
  framework::proto::ProgramDesc desc;
  FLEET_ENFORCE(desc.ParseFromString(std::string(program_bytes)), InvalidArgument,
                "cannot parse the serialised ProgramDesc");
  auto prepared = executor.Prepare(desc, 0);
  if (!log.is_none()) {
    options.log = [&log](const std::string& line) { CallPython(log, line); };
  }
  data::MultiTrainer trainer(&executor, prepared.get(), scope, std::move(options));
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  data::TrainerResult result;
  {
    py::gil_scoped_release release;
    trainer.Start(dataset);
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
  return ResultToDict(result);
}

// load_into_memory with the GIL released, waking every 100 ms to let Python handle signals: a
// Ctrl-C stops the readers (children killed, threads joined) and then propagates.
py::dict LoadIntoMemory(InMemoryDataset& dataset) {
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  ReadStats stats;
  {
    py::gil_scoped_release release;
    stats = dataset.LoadIntoMemory([&] {
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() == 0) return false;
      PyErr_Fetch(&type, &value, &trace);
      return true;
    });
  }
  if (type != nullptr) {
    PyErr_Restore(type, value, trace);
    throw py::error_already_set();
  }
  return StatsToDict(stats);
}

void BindDatasets(py::module_& m) {
  py::class_<Dataset, std::shared_ptr<Dataset>>(m, "DatasetBase")
      .def_property_readonly("batch_size", [](const Dataset& d) { return d.config().batch_size; })
      .def_property_readonly("thread", [](const Dataset& d) { return d.config().threads; })
      .def("set_batching", &Dataset::SetBatching, py::arg("batch_size"), py::arg("threads"))
      .def_property_readonly("slot_names", [](const Dataset& d) {
        std::vector<std::string> names;
        for (const auto& s : d.config().slots) names.push_back(s.name);
        return names;
      });

  py::class_<QueueDataset, Dataset, std::shared_ptr<QueueDataset>>(m, "QueueDataset")
      .def(py::init([](const std::vector<PySlot>& slots, int64_t batch_size, int threads,
                       const std::string& pipe_command, bool skip_bad_lines,
                       std::vector<std::string> files, double pipe_command_timeout_s) {
             return std::make_shared<QueueDataset>(
                 MakeConfig(slots, batch_size, threads, pipe_command, skip_bad_lines,
                            pipe_command_timeout_s),
                 std::move(files));
           }),
           py::arg("slots"), py::arg("batch_size"), py::arg("threads"), py::arg("pipe_command"),
           py::arg("skip_bad_lines"), py::arg("files"), py::arg("pipe_command_timeout_s") = 600.0);

  py::class_<InMemoryDataset, Dataset, std::shared_ptr<InMemoryDataset>>(m, "InMemoryDataset")
      .def(py::init([](const std::vector<PySlot>& slots, int64_t batch_size, int threads,
                       const std::string& pipe_command, bool skip_bad_lines,
                       std::vector<std::string> files, double pipe_command_timeout_s) {
             return std::make_shared<InMemoryDataset>(
                 MakeConfig(slots, batch_size, threads, pipe_command, skip_bad_lines,
                            pipe_command_timeout_s),
                 std::move(files));
           }),
           py::arg("slots"), py::arg("batch_size"), py::arg("threads"), py::arg("pipe_command"),
           py::arg("skip_bad_lines"), py::arg("files"), py::arg("pipe_command_timeout_s") = 600.0)
      .def("load_into_memory", &LoadIntoMemory,
           "Parses every file into memory. Ctrl-C (any pending Python signal) stops the readers, "
           "kills running pipe commands, leaves memory as it was and raises.")
      .def("local_shuffle", &InMemoryDataset::LocalShuffle, py::arg("seed"),
           py::call_guard<py::gil_scoped_release>())
      .def(
          "global_shuffle",
          [](InMemoryDataset& d, int rank, int world_size, const py::function& exchange,
             uint64_t seed) {
            auto call = [&exchange](std::vector<std::string> payloads) {
              py::gil_scoped_acquire gil;
              py::list out;
              for (auto& p : payloads) out.append(py::bytes(p));
              std::vector<std::string> received;
              for (py::handle item : exchange(out)) received.push_back(item.cast<std::string>());
              return received;
            };
            py::gil_scoped_release release;
            d.GlobalShuffle(rank, world_size, call, seed);
          },
          py::arg("rank"), py::arg("world_size"), py::arg("exchange"), py::arg("seed"),
          "exchange(list[bytes]) -> list[bytes]: sends item i to worker i, returns what each "
          "worker sent here.")
      // These wait for a running load (which may be waiting for the GIL to poll for signals).
      .def("memory_data_size", &InMemoryDataset::MemoryDataSize,
           py::call_guard<py::gil_scoped_release>())
      .def("memory_bytes", &InMemoryDataset::MemoryBytes,
           py::call_guard<py::gil_scoped_release>())
      .def("release_memory", &InMemoryDataset::ReleaseMemory,
           py::call_guard<py::gil_scoped_release>());
}

}  // namespace

void BindData(py::module_& m) {
  BindDatasets(m);
  const auto* registry = m.attr("op_registry").cast<const framework::OpRegistry*>();
  // One executor for every dataset pass: it holds only the registry, and passes prepare their
  // own program.
  auto executor = std::make_shared<framework::Executor>(registry);
  m.def(
      "run_from_dataset",
      [executor](const py::bytes& program_desc, py::object scope, Dataset& dataset, int threads,
                 std::vector<std::string> fetch_names, std::vector<std::string> fetch_labels,
                 int64_t print_period, bool debug, uint64_t seed, py::object log) {
        data::TrainerOptions options;
        options.threads = threads;
        options.fetch_names = std::move(fetch_names);
        options.fetch_labels = std::move(fetch_labels);
        options.print_period = print_period;
        options.debug = debug;
        options.seed = seed;
        return RunPass(*executor, program_desc, scope.cast<Scope*>(), &dataset,
                       std::move(options), log);
      },
      py::arg("program_desc"), py::arg("scope"), py::arg("dataset"), py::arg("threads"),
      py::arg("fetch_names"), py::arg("fetch_labels"), py::arg("print_period"),
      py::arg("debug"), py::arg("seed"), py::arg("log"),
      "Runs block 0 of the program over one pass of the dataset with `threads` trainer "
      "threads; returns counters, per-fetch sums and the last fetched values.");
}

}  // namespace fleet::python
