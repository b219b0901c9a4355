#include "collective/backend.h"

#include "absl/strings/str_cat.h"
#include "core/errors.h"

namespace fleet::collective {

ReduceOp ReduceOpFromName(const std::string& name) {
  if (name == "sum") return ReduceOp::kSum;
  if (name == "max") return ReduceOp::kMax;
  if (name == "min") return ReduceOp::kMin;
  throw InvalidArgument(
      absl::StrCat("reduce mode '", name, "' is not supported (use 'sum', 'max' or 'min')"));
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "unknown";
}

void CollectiveBackend::AllReduce(Tensor* tensor, const AllReduceOptions& options) {
  FLEET_ENFORCE(tensor->initialized(), InvalidArgument, "all-reduce in group '", name(),
                "': the tensor has no data");
  void* data = tensor->mutable_data(tensor->dtype());
  AllReduceOptions with_shape = options;
  if (with_shape.shape.empty()) with_shape.shape = tensor->shape();
  AllReduce(data, data, static_cast<size_t>(tensor->numel()), tensor->dtype(), with_shape);
}

}  // namespace fleet::collective
