#include "core/lod_tensor.h"

#include "absl/strings/str_join.h"

namespace fleet {

std::string LoDToString(const LoD& lod) {
  std::vector<std::string> levels;
  for (const auto& level : lod)
    levels.push_back(absl::StrCat("[", absl::StrJoin(level, ", "), "]"));
  return absl::StrCat("[", absl::StrJoin(levels, ", "), "]");
}

int64_t LoDTensor::NumSequences() const {
  if (lod_.empty()) return rank() == 0 ? 1 : dim(0);
  return static_cast<int64_t>(lod_[0].size()) - 1;
}

void LoDTensor::ValidateLoD(const std::string& what) const {
  for (size_t level = 0; level < lod_.size(); ++level) {
    const auto& offsets = lod_[level];
    FLEET_ENFORCE(!offsets.empty() && offsets[0] == 0, InvalidArgument, what, ": lod level ", level,
                  " must start at 0, got ", LoDToString(lod_));
    for (size_t i = 1; i < offsets.size(); ++i) {
      FLEET_ENFORCE(offsets[i] >= offsets[i - 1], InvalidArgument, what, ": lod level ", level,
                    " decreases at position ", i, " in ", LoDToString(lod_));
    }
    size_t expected_end =
        level + 1 < lod_.size() ? lod_[level + 1].size() - 1 : static_cast<size_t>(dim(0));
    FLEET_ENFORCE(offsets.back() == expected_end, InvalidArgument, what, ": lod level ", level,
                  " ends at ", offsets.back(), " but the next level has ", expected_end,
                  " entries (lod ", LoDToString(lod_), ", shape ", ShapeToString(shape()), ")");
  }
}

}  // namespace fleet
