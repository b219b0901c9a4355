#include "operators/broadcast.h"

namespace fleet::operators {

BroadcastPlan::BroadcastPlan(const Shape& full, const Shape& partial)
    : full_numel_(NumElements(full)), partial_numel_(NumElements(partial)) {
  FLEET_ENFORCE(full.size() == partial.size(), Internal, "broadcast plan: shapes ",
                ShapeToString(full), " and ", ShapeToString(partial), " differ in rank");
  // Merge runs of dimensions with the same broadcast flag; size-1 dimensions of `full` carry no
  // iteration and are dropped.
  std::vector<int64_t> dims;
  std::vector<bool> broadcast;
  for (size_t i = 0; i < full.size(); ++i) {
    if (full[i] == 1) continue;
    FLEET_ENFORCE(partial[i] == full[i] || partial[i] == 1, Internal,
                  "broadcast plan: ", ShapeToString(partial), " does not broadcast to ",
                  ShapeToString(full));
    bool b = partial[i] == 1;
    if (!dims.empty() && broadcast.back() == b) {
      dims.back() *= full[i];
    } else {
      dims.push_back(full[i]);
      broadcast.push_back(b);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    broadcast.push_back(false);
  }
  inner_ = dims.back();
  inner_broadcast_ = broadcast.back();
  int64_t stride = inner_broadcast_ ? 1 : inner_;
  for (size_t i = dims.size() - 1; i-- > 0;) {
    outer_dims_.insert(outer_dims_.begin(), dims[i]);
    outer_strides_.insert(outer_strides_.begin(), broadcast[i] ? 0 : stride);
    if (!broadcast[i]) stride *= dims[i];
  }
  num_runs_ = inner_ == 0 ? 0 : full_numel_ / inner_;
}

}  // namespace fleet::operators
