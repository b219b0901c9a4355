#include "core/dtype.h"

#include "core/errors.h"

namespace fleet {

size_t SizeOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kBool:
      return 1;
  }
  throw Internal(absl::StrCat("SizeOf: unknown dtype ", static_cast<int>(dtype)));
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
  }
  return "unknown";
}

DType DTypeFromInt(int value, const std::string& what) {
  FLEET_ENFORCE(value >= 0 && value <= static_cast<int>(DType::kBool), InvalidArgument, what,
                ": unknown dtype number ", value, " (expected 0..4)");
  return static_cast<DType>(value);
}

}  // namespace fleet
