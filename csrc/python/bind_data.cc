// Python view of the data area: datasets (the trainer that runs passes over them is in
// bind_trainer.cc). Every blocking call releases the GIL; the global shuffle's exchange calls
// back into Python holding the GIL only for the call.

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "data/dataset.h"
#include "python/read_stats.h"
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

DataFeedConfig MakeConfig(const std::vector<PySlot>& slots, int64_t batch_size, int threads,
                          const std::string& pipe_command, bool skip_bad_lines) {
  DataFeedConfig config;
  for (const auto& [name, dtype, lod_level, shape] : slots) {
    config.slots.push_back(
        data::MakeSlotSpec(name, DTypeFromInt(dtype, name), lod_level, shape));
  }
  config.batch_size = batch_size;
  config.threads = threads;
  config.pipe_command = pipe_command;
  config.skip_bad_lines = skip_bad_lines;
  return config;
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
                       std::vector<std::string> files) {
             return std::make_shared<QueueDataset>(
                 MakeConfig(slots, batch_size, threads, pipe_command, skip_bad_lines),
                 std::move(files));
           }),
           py::arg("slots"), py::arg("batch_size"), py::arg("threads"), py::arg("pipe_command"),
           py::arg("skip_bad_lines"), py::arg("files"));

  py::class_<InMemoryDataset, Dataset, std::shared_ptr<InMemoryDataset>>(m, "InMemoryDataset")
      .def(py::init([](const std::vector<PySlot>& slots, int64_t batch_size, int threads,
                       const std::string& pipe_command, bool skip_bad_lines,
                       std::vector<std::string> files) {
             return std::make_shared<InMemoryDataset>(
                 MakeConfig(slots, batch_size, threads, pipe_command, skip_bad_lines),
                 std::move(files));
           }),
           py::arg("slots"), py::arg("batch_size"), py::arg("threads"), py::arg("pipe_command"),
           py::arg("skip_bad_lines"), py::arg("files"))
      .def("load_into_memory",
           [](InMemoryDataset& d) {
             ReadStats stats;
             {
               py::gil_scoped_release release;
               stats = d.LoadIntoMemory();
             }
             return ReadStatsToDict(stats);
           })
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
      .def("memory_data_size", &InMemoryDataset::MemoryDataSize)
      .def("memory_bytes", &InMemoryDataset::MemoryBytes)
      .def("release_memory", &InMemoryDataset::ReleaseMemory,
           py::call_guard<py::gil_scoped_release>());
}

}  // namespace

void BindData(py::module_& m) { BindDatasets(m); }

}  // namespace fleet::python
