// Python view of the data area: datasets and the multi-threaded trainer behind
// train_from_dataset. Every blocking call releases the GIL; progress lines and the global
// shuffle's exchange call back into Python holding the GIL only for the call.

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "core/status.h"
#include "core/timeout.h"
#include "data/dataset.h"
#include "python/numpy_convert.h"
#include "python/read_stats.h"

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
                          double pipe_command_timeout_s, const std::string& feed_priority) {
  DataFeedConfig config;
  for (const auto& [name, dtype, lod_level, shape] : slots) {
    config.slots.push_back(data::MakeSlotSpec(name, DTypeFromInt(dtype, name), lod_level, shape));
  }
  config.batch_size = batch_size;
  config.threads = threads;
  config.pipe_command = pipe_command;
  config.skip_bad_lines = skip_bad_lines;
  config.pipe_idle_timeout =
      ValueOrThrow(TimeoutFromSeconds(pipe_command_timeout_s, "pipe_command timeout"));
  config.feed_priority = ValueOrThrow(ThreadPriorityFromName(feed_priority), "feed_priority");
  config.warn = WarnInPython;
  return config;
}

// load_into_memory with the GIL released, waking every 100 ms to let Python handle signals: a
// Ctrl-C stops the readers (children killed, threads joined) and then propagates.
data::ReadStats LoadIntoMemory(InMemoryDataset& dataset) {
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
  return stats;
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
                       std::vector<std::string> files, double pipe_command_timeout_s,
                       const std::string& feed_priority) {
             return std::make_shared<QueueDataset>(
                 MakeConfig(slots, batch_size, threads, pipe_command, skip_bad_lines,
                            pipe_command_timeout_s, feed_priority),
                 std::move(files));
           }),
           py::arg("slots"), py::arg("batch_size"), py::arg("threads"), py::arg("pipe_command"),
           py::arg("skip_bad_lines"), py::arg("files"), py::arg("pipe_command_timeout_s") = 600.0,
           py::arg("feed_priority") = "normal");

  py::class_<InMemoryDataset, Dataset, std::shared_ptr<InMemoryDataset>>(m, "InMemoryDataset")
      .def(py::init([](const std::vector<PySlot>& slots, int64_t batch_size, int threads,
                       const std::string& pipe_command, bool skip_bad_lines,
                       std::vector<std::string> files, double pipe_command_timeout_s,
                       const std::string& feed_priority) {
             return std::make_shared<InMemoryDataset>(
                 MakeConfig(slots, batch_size, threads, pipe_command, skip_bad_lines,
                            pipe_command_timeout_s, feed_priority),
                 std::move(files));
           }),
           py::arg("slots"), py::arg("batch_size"), py::arg("threads"), py::arg("pipe_command"),
           py::arg("skip_bad_lines"), py::arg("files"), py::arg("pipe_command_timeout_s") = 600.0,
           py::arg("feed_priority") = "normal")
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
      .def("memory_bytes", &InMemoryDataset::MemoryBytes, py::call_guard<py::gil_scoped_release>())
      .def("release_memory", &InMemoryDataset::ReleaseMemory,
           py::call_guard<py::gil_scoped_release>());
}

}  // namespace

void BindReadStats(py::module_& m) {
  using data::ReadStats;
  py::class_<ReadStats>(m, "ReadStats", "What a dataset's readers did (data/file_readers.h)")
      .def_readonly("files", &ReadStats::files)
      .def_readonly("lines", &ReadStats::lines)
      .def_readonly("samples", &ReadStats::samples)
      .def_readonly("bad_lines", &ReadStats::bad_lines)
      .def_readonly("bytes", &ReadStats::bytes)
      .def_readonly("bad_line_examples", &ReadStats::bad_line_examples)
      .def_readonly("interrupted", &ReadStats::interrupted);
}

void BindData(py::module_& m) {
  BindReadStats(m);
  BindDatasets(m);
}

}  // namespace fleet::python
