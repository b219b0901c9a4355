#pragma once
// Element types a tensor can hold. The numbering matches VarDesc.dtype in framework.proto.

#include <cstddef>
#include <cstdint>
#include <string>

namespace fleet {

enum class DType : int { kFloat32 = 0, kFloat64 = 1, kInt32 = 2, kInt64 = 3, kBool = 4 };

size_t SizeOf(DType dtype);
const char* DTypeName(DType dtype);
// Throws InvalidArgument naming `what` when `value` is not a known DType number.
DType DTypeFromInt(int value, const std::string& what);

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
};

// Calls fn(T{}) with T the C++ type of `dtype`; for kernels that work on every numeric type.
template <typename Fn>
auto VisitDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32:
      return fn(float{});
    case DType::kFloat64:
      return fn(double{});
    case DType::kInt32:
      return fn(int32_t{});
    case DType::kInt64:
      return fn(int64_t{});
    case DType::kBool:
      return fn(bool{});
  }
  return fn(float{});
}

}  // namespace fleet
