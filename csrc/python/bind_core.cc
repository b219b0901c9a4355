// Python view of tensors, variables and scopes. Arrays cross by copy: a fed array may be changed
// by the caller afterwards, and a fetched one must not change under the caller's feet.

#include <pybind11/stl.h>

#include "core/device_memory.h"
#include "core/scope.h"
#include "python/numpy_convert.h"

namespace fleet::python {
namespace {

LoD LengthsToOffsets(const std::vector<std::vector<size_t>>& lengths) {
  LoD lod;
  for (const auto& level : lengths) {
    std::vector<size_t> offsets{0};
    for (size_t n : level) offsets.push_back(offsets.back() + n);
    lod.push_back(std::move(offsets));
  }
  return lod;
}

std::vector<std::vector<size_t>> OffsetsToLengths(const LoD& lod) {
  std::vector<std::vector<size_t>> lengths;
  for (const auto& level : lod) {
    std::vector<size_t> n;
    for (size_t i = 1; i < level.size(); ++i) n.push_back(level[i] - level[i - 1]);
    lengths.push_back(std::move(n));
  }
  return lengths;
}

void BindLoDTensor(py::module_& m) {
  py::class_<LoDTensor>(m, "LoDTensor")
      .def(py::init<>())
      .def(
          "set",
          // `place` is Paddle's second argument (tensor.set(array, fluid.CPUPlace())); the
          // values are held in host memory and an executor moves them where it runs.
          [](LoDTensor& t, const py::array& array, const py::object& /*place*/) {
            CopyArrayToTensor(array, &t, "LoDTensor");
          },
          py::arg("array"), py::arg("place") = py::none(),
          "Copies a NumPy array into the tensor (shape and dtype follow it).")
      .def("numpy", [](const LoDTensor& t) { return TensorToArray(t); })
      .def(
          "__array__",
          [](const LoDTensor& t, py::object dtype, py::object copy) {
            py::array a = TensorToArray(t);
            return dtype.is_none() ? a : a.attr("astype")(dtype).cast<py::array>();
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none())
      .def("shape", [](const LoDTensor& t) { return t.shape(); })
      .def("dtype", [](const LoDTensor& t) { return std::string(DTypeName(t.dtype())); })
      .def("initialized", &LoDTensor::initialized)
      .def("lod", &LoDTensor::lod)
      .def(
          "set_lod",
          [](LoDTensor& t, const LoD& lod) {
            t.set_lod(lod);
            t.ValidateLoD("LoDTensor.set_lod");
          },
          py::arg("lod"))
      .def(
          "set_lod_one_row_per_sequence",
          [](LoDTensor& t) {
            // The lod of a lod_level-1 input fed as a plain array: each row its own sequence.
            std::vector<size_t> offsets(t.rank() == 0 ? 2 : t.dim(0) + 1);
            for (size_t i = 0; i < offsets.size(); ++i) offsets[i] = i;
            t.set_lod({std::move(offsets)});
          },
          "Sets lod [[0, 1, ..., rows]]: every row is a sequence of length one.")
      .def("recursive_sequence_lengths",
           [](const LoDTensor& t) { return OffsetsToLengths(t.lod()); })
      .def(
          "set_recursive_sequence_lengths",
          [](LoDTensor& t, const std::vector<std::vector<size_t>>& lengths) {
            t.set_lod(LengthsToOffsets(lengths));
            t.ValidateLoD("LoDTensor.set_recursive_sequence_lengths");
          },
          py::arg("lengths"))
      .def("__repr__", [](const LoDTensor& t) {
        return absl::StrCat("LoDTensor(shape=", ShapeToString(t.shape()),
                            ", dtype=", DTypeName(t.dtype()), ", lod=", LoDToString(t.lod()), ")");
      });
}

void BindSelectedRows(py::module_& m) {
  py::class_<SelectedRows>(m, "SelectedRows")
      .def(py::init<>())
      .def("rows",
           [](const SelectedRows& s) {
             // Rows a device kernel produced are on the device only (core/selected_rows.h).
             if (s.value().place().device == DeviceType::kCPU) return s.rows();
             return CopyToPlace(s, CPUPlace()).rows();
           })
      .def("height", &SelectedRows::height)
      .def("numpy_value", [](const SelectedRows& s) { return TensorToArray(s.value()); })
      .def(
          "set",
          [](SelectedRows& s, const std::vector<int64_t>& rows, const py::array& value,
             int64_t height) {
            *s.mutable_rows() = rows;
            s.set_height(height);
            CopyArrayToTensor(value, s.mutable_value(), "SelectedRows.set");
            FLEET_ENFORCE(
                s.value().rank() >= 1 && s.value().dim(0) == static_cast<int64_t>(rows.size()),
                InvalidArgument, "SelectedRows.set: value has shape ",
                ShapeToString(s.value().shape()), " but ", rows.size(), " rows were given");
          },
          py::arg("rows"), py::arg("value"), py::arg("height"))
      .def("to_dense", [](const SelectedRows& device_or_host) {
        // Dense [height, width] view with duplicate rows added, for tests and debugging.
        const SelectedRows& s = device_or_host;
        SelectedRows merged = MergeDuplicateRows(CopyToPlace(device_or_host, CPUPlace()));
        int64_t width = merged.value().rank() >= 2 ? merged.value().dim(1) : 0;
        py::array_t<float> out({s.height(), width});
        float* dst = out.mutable_data();
        std::fill(dst, dst + s.height() * width, 0.f);
        const float* src = merged.rows().empty() ? nullptr : merged.value().data<float>();
        for (size_t i = 0; i < merged.rows().size(); ++i) {
          int64_t r = merged.rows()[i];
          FLEET_ENFORCE(r >= 0 && r < s.height(), InvalidArgument, "SelectedRows row ", r,
                        " is outside height ", s.height());
          std::copy(src + i * width, src + (i + 1) * width, dst + r * width);
        }
        return out;
      });
}

void BindScope(py::module_& m) {
  py::class_<Variable>(m, "Variable")
      .def(
          "get_tensor", [](Variable& v) { return v.GetMutable<LoDTensor>(); },
          py::return_value_policy::reference_internal,
          "The variable's LoDTensor (created empty if the variable holds nothing).")
      .def(
          "get_selected_rows", [](Variable& v) { return v.GetMutable<SelectedRows>(); },
          py::return_value_policy::reference_internal)
      .def("is_initialized", &Variable::IsInitialized)
      .def("is_selected_rows", &Variable::IsType<SelectedRows>)
      .def("is_lod_tensor", &Variable::IsType<LoDTensor>)
      .def("kind", [](const Variable& v) { return std::string(v.KindName()); });

  py::class_<Scope>(m, "Scope")
      .def(py::init<>())
      .def("var", &Scope::Var, py::arg("name"), py::return_value_policy::reference_internal,
           "Returns the variable, creating it in this scope if missing.")
      .def("find_var", &Scope::FindVar, py::arg("name"),
           py::return_value_policy::reference_internal,
           "Returns the variable from this scope or an ancestor, or None.")
      .def("new_scope", &Scope::NewScope, py::return_value_policy::reference_internal)
      .def("drop_kids", &Scope::DropKids)
      .def("local_var_names", &Scope::LocalVarNames);
}

}  // namespace

void BindCore(py::module_& m) {
  BindLoDTensor(m);
  BindSelectedRows(m);
  BindScope(m);
}

}  // namespace fleet::python
