// Python view of one server's tables and update rules without RPC (`_core.ps.SparseTable`,
// `DenseTable`, `UpdateRule`), for tests of the tables and the rules on NumPy rows. Arrays cross
// as in bind_ps.cc; every call that works through a whole array releases the GIL.

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "ps/table/dense_table.h"
#include "ps/table/shard_load.h"
#include "ps/table/sparse_table.h"
#include "ps/table/update_rule.h"
#include "python/ps_bindings.h"

namespace fleet::python {
namespace {

// Statistics of a table on one server, as typed objects (`_core.ps.TableStats`, with `ssd` an
// `SsdTierStats` or None), read by the tables here and by the client's stats() (bind_ps.cc).
void BindTableStats(py::module_& m) {
  using ps::proto::SsdTierStats;
  using ps::proto::TableStats;
  py::class_<SsdTierStats>(m, "SsdTierStats",
                           "A sparse table's SSD tier on one server; counters since its start.")
      .def_property_readonly("rows_in_memory", &SsdTierStats::rows_in_memory)
      .def_property_readonly("rows_on_disk", &SsdTierStats::rows_on_disk)
      .def_property_readonly("memory_hits", &SsdTierStats::memory_hits)
      .def_property_readonly("disk_reads", &SsdTierStats::disk_reads)
      .def_property_readonly("hit_rate",
                             [](const SsdTierStats& s) {
                               // Of the rows requests found, the share found in memory (1 before
                               // any request).
                               const uint64_t looked_up = s.memory_hits() + s.disk_reads();
                               return looked_up == 0 ? 1.0
                                                     : double(s.memory_hits()) / double(looked_up);
                             })
      .def_property_readonly("bytes_read", &SsdTierStats::bytes_read)
      .def_property_readonly("bytes_written", &SsdTierStats::bytes_written)
      .def_property_readonly("evictions", &SsdTierStats::evictions)
      .def("__repr__", [](const SsdTierStats& s) {
        return absl::StrCat("SsdTierStats(rows_in_memory=", s.rows_in_memory(),
                            ", rows_on_disk=", s.rows_on_disk(), ", memory_hits=", s.memory_hits(),
                            ", disk_reads=", s.disk_reads(), ", evictions=", s.evictions(), ")");
      });
  py::class_<TableStats>(m, "TableStats", "A table's statistics on one server.")
      .def_property_readonly("table_id", &TableStats::table_id)
      .def_property_readonly(
          "type",
          [](const TableStats& s) { return s.type() == ps::proto::SPARSE ? "sparse" : "dense"; })
      .def_property_readonly("rows", &TableStats::rows, "sparse rows, or dense blocks")
      .def_property_readonly("bytes", &TableStats::bytes, "memory held by the table")
      .def_property_readonly("filtered_keys", &TableStats::filtered_keys,
                             "keys the count filter still holds back")
      .def_property_readonly(
          "ssd",
          [](const TableStats& s) -> std::optional<ps::proto::SsdTierStats> {
            if (!s.has_ssd()) return std::nullopt;  // storage "memory"
            return s.ssd();
          },
          "the SSD tier's statistics (storage \"ssd\"), else None")
      .def("__repr__", [](const TableStats& s) {
        return absl::StrCat("TableStats(table_id=", s.table_id(),
                            ", type=", s.type() == ps::proto::SPARSE ? "sparse" : "dense",
                            ", rows=", s.rows(), ", bytes=", s.bytes(),
                            ", filtered_keys=", s.filtered_keys(), s.has_ssd() ? ", ssd" : "", ")");
      });
}

void BindSparseTable(py::module_& m) {
  py::class_<ps::SparseTable>(m, "SparseTable", "One server's sparse table, without RPC.")
      .def(py::init([](const py::bytes& config) {
             return ValueOrThrow(ps::SparseTable::Create(
                 ParseMessage<ps::proto::TableConfig>(config, "TableConfig")));
           }),
           py::arg("config"))
      .def_property_readonly("dim", &ps::SparseTable::dim)
      .def_property_readonly("row_width", &ps::SparseTable::row_width)
      .def(
          "pull",
          [](ps::SparseTable& t, const py::array& keys, std::optional<py::array> out) {
            auto k = ArraySpan<const int64_t>(keys, "keys", false);
            py::array result = out ? *out
                                   : py::array_t<float>({static_cast<py::ssize_t>(k.size()),
                                                         static_cast<py::ssize_t>(t.dim())});
            auto o = ArraySpan<float>(result, "out", true);
            {
              py::gil_scoped_release release;
              ThrowIfError(t.Pull(k, o));
            }
            return result;
          },
          py::arg("keys"), py::arg("out") = py::none(),
          "The rows of keys, float32 [len(keys), dim], into `out` when given (len(keys) * dim "
          "float32 elements, reused across calls) or a new array.")
      .def(
          "push",
          [](ps::SparseTable& t, const py::array& keys, const py::array& grads, bool is_delta) {
            auto k = ArraySpan<const int64_t>(keys, "keys", false);
            auto g = ArraySpan<const float>(grads, "grads", false);
            py::gil_scoped_release release;
            ThrowIfError(t.Push(k, g, is_delta));
          },
          py::arg("keys"), py::arg("grads"), py::arg("is_delta") = false)
      .def(
          "save",
          [](ps::SparseTable& t, const std::string& path, bool delta) {
            py::gil_scoped_release release;
            return ValueOrThrow(t.Save(path, delta ? ps::proto::DELTA : ps::proto::BASE));
          },
          py::arg("path"), py::arg("delta") = false)
      .def(
          "load",
          [](ps::SparseTable& t, const std::vector<std::string>& paths, int64_t server_index,
             int64_t num_servers) {
            const uint32_t index = U32(server_index, "server_index");
            const uint32_t servers = U32(num_servers, "num_servers");
            py::gil_scoped_release release;
            return ValueOrThrow(ps::LoadShardFromFiles(t, paths, index, servers));
          },
          py::arg("paths"), py::arg("server_index") = 0, py::arg("num_servers") = 1)
      .def(
          "shrink",
          [](ps::SparseTable& t, int64_t max_unseen_saves) {
            const uint32_t saves = U32(max_unseen_saves, "max_unseen_saves");
            py::gil_scoped_release release;
            return t.Shrink(saves);
          },
          py::arg("max_unseen_saves"))
      .def("stats", [](const ps::SparseTable& t) {
        ps::proto::TableStats stats;
        {
          py::gil_scoped_release release;  // takes every shard's lock
          stats = t.Stats();
        }
        return stats;
      });
}

void BindDenseTable(py::module_& m) {
  py::class_<ps::DenseTable>(m, "DenseTable", "One server's blocks of a dense table.")
      .def(py::init([](const py::bytes& config, uint32_t server_index, uint32_t num_servers) {
             return ValueOrThrow(
                 ps::DenseTable::Create(ParseMessage<ps::proto::TableConfig>(config, "TableConfig"),
                                        server_index, num_servers, ps::RoundRobinBlockShard));
           }),
           py::arg("config"), py::arg("server_index") = 0, py::arg("num_servers") = 1)
      .def_property_readonly("local_size", &ps::DenseTable::local_size)
      .def("pull",
           [](const ps::DenseTable& t) {
             py::array_t<float> out(static_cast<py::ssize_t>(t.local_size()));
             absl::Span<float> o(out.mutable_data(), out.size());
             absl::Status status;
             {
               py::gil_scoped_release release;
               status = t.Pull(o);
             }
             ThrowIfError(status);
             return out;
           })
      .def(
          "push",
          [](ps::DenseTable& t, const py::array& grads, bool is_delta) {
            auto g = ArraySpan<const float>(grads, "grads", false);
            py::gil_scoped_release release;
            ThrowIfError(t.Push(g, is_delta));
          },
          py::arg("grads"), py::arg("is_delta") = false)
      .def(
          "push_and_pull",
          [](ps::DenseTable& t, const py::array& grads, const py::array& out) {
            auto g = ArraySpan<const float>(grads, "grads", false);
            auto o = ArraySpan<float>(out, "out", true);
            py::gil_scoped_release release;
            ThrowIfError(t.PushAndPull(g, o));
          },
          py::arg("grads"), py::arg("out"),
          "Pushes gradients and writes the values after the push into out (local_size floats), "
          "in one pass over the table.")
      .def("stats", [](const ps::DenseTable& t) {
        ps::proto::TableStats stats;
        {
          py::gil_scoped_release release;  // takes every block's lock
          stats = t.Stats();
        }
        return stats;
      });
}

void BindUpdateRule(py::module_& m) {
  py::class_<ps::UpdateRule>(m, "UpdateRule", "A server-side optimizer, on NumPy rows.")
      .def(py::init([](const py::bytes& config) {
             return ValueOrThrow(ps::MakeUpdateRule(
                 ParseMessage<ps::proto::OptimizerConfig>(config, "OptimizerConfig")));
           }),
           py::arg("config"))
      .def("state_dim", &ps::UpdateRule::StateDim, py::arg("dim"))
      .def(
          "init_state",
          [](const ps::UpdateRule& rule, size_t dim) {
            py::array_t<float> state(static_cast<py::ssize_t>(rule.StateDim(dim)));
            rule.InitState(dim, state.mutable_data());
            return state;
          },
          py::arg("dim"))
      .def(
          "update",
          [](const ps::UpdateRule& rule, const py::array& w, const py::array& state,
             const py::array& grad) {
            auto ws = ArraySpan<float>(w, "w", true);
            auto ss = ArraySpan<float>(state, "state", true);
            auto gs = ArraySpan<const float>(grad, "grad", false);
            FLEET_ENFORCE(gs.size() == ws.size() && ss.size() == rule.StateDim(ws.size()),
                          InvalidArgument, "update: w and grad need the same size and state ",
                          rule.StateDim(ws.size()), " floats");
            py::gil_scoped_release release;
            rule.Update(ws.size(), ws.data(), ss.data(), gs.data());
          },
          py::arg("w"), py::arg("state"), py::arg("grad"), "Updates w and state in place.");
}

}  // namespace

void BindPsTables(py::module_& ps) {
  BindTableStats(ps);
  BindSparseTable(ps);
  BindDenseTable(ps);
  BindUpdateRule(ps);
}

}  // namespace fleet::python
