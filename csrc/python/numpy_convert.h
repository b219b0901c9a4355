#pragma once
// Conversions between NumPy arrays and Fleet tensors.

#include <pybind11/numpy.h>

#include "core/tensor.h"
#include "python/bindings.h"

namespace fleet::python {

// The Fleet dtype of an array; throws InvalidArgument naming `what` for unsupported dtypes.
DType DTypeOfArray(const py::array& array, const std::string& what);
// Copies the array (any layout) into `tensor`, converting float64 to float32 only when
// `float64_to_float32` is set (feeds follow the variable's declared dtype).
void CopyArrayToTensor(const py::array& array, Tensor* tensor, const std::string& what);
// A new NumPy array holding a copy of the tensor's elements.
py::array TensorToArray(const Tensor& tensor);

}  // namespace fleet::python
