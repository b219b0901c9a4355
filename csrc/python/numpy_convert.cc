#include "python/numpy_convert.h"

#include <cstring>

#include "core/device_memory.h"

namespace fleet::python {

DType DTypeOfArray(const py::array& array, const std::string& what) {
  const auto dt = array.dtype();
  if (dt.is(py::dtype::of<float>())) return DType::kFloat32;
  if (dt.is(py::dtype::of<double>())) return DType::kFloat64;
  if (dt.is(py::dtype::of<int32_t>())) return DType::kInt32;
  if (dt.is(py::dtype::of<int64_t>())) return DType::kInt64;
  if (dt.is(py::dtype::of<bool>())) return DType::kBool;
  throw InvalidArgument(absl::StrCat(what, ": NumPy dtype ", py::str(dt).cast<std::string>(),
                                     " is not supported (use float32, float64, int32, int64 "
                                     "or bool)"));
}

void CopyArrayToTensor(const py::array& array, Tensor* tensor, const std::string& what) {
  DType dtype = DTypeOfArray(array, what);
  Shape shape(array.shape(), array.shape() + array.ndim());
  // c_style|forcecast gives a contiguous view (a copy only when the input is strided).
  py::array contiguous = py::array::ensure(array, py::array::c_style);
  tensor->Resize(shape);
  void* dst = tensor->mutable_data(dtype);
  std::memcpy(dst, contiguous.data(), tensor->nbytes());
}

py::array TensorToArray(const Tensor& tensor) {
  if (tensor.place().device != DeviceType::kCPU) {
    // Device memory: a host copy first (waits for the kernels that write it).
    Tensor host;
    {
      py::gil_scoped_release release;
      host = CopyToPlace(tensor, CPUPlace());
    }
    return TensorToArray(host);
  }
  auto make = [&](auto tag) -> py::array {
    using T = decltype(tag);
    py::array_t<T> out(std::vector<py::ssize_t>(tensor.shape().begin(), tensor.shape().end()));
    if (tensor.numel() > 0) std::memcpy(out.mutable_data(), tensor.raw_data(), tensor.nbytes());
    return out;
  };
  return VisitDType(tensor.dtype(), make);
}

}  // namespace fleet::python
