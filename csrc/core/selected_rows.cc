#include "core/selected_rows.h"

#include <cstring>

#include "absl/container/flat_hash_map.h"

namespace fleet {

SelectedRows MergeDuplicateRows(const SelectedRows& input) {
  const auto& rows = input.rows();
  const Tensor& value = input.value();
  int64_t width =
      rows.empty() ? (value.rank() >= 2 ? value.dim(1) : 0) : value.numel() / rows.size();
  absl::flat_hash_map<int64_t, int64_t> slot_of;
  slot_of.reserve(rows.size());
  std::vector<int64_t> unique_rows;
  std::vector<int64_t> slot(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    auto [it, inserted] = slot_of.try_emplace(rows[i], static_cast<int64_t>(unique_rows.size()));
    if (inserted) unique_rows.push_back(rows[i]);
    slot[i] = it->second;
  }
  SelectedRows out;
  out.set_height(input.height());
  out.mutable_value()->Resize({static_cast<int64_t>(unique_rows.size()), width});
  float* dst = out.mutable_value()->mutable_data<float>();
  if (!rows.empty()) {
    // Slots are numbered in first-seen order, so a row's first occurrence is the one whose slot
    // is the next unwritten one: it is copied, later ones added (no zeroing pass first).
    const float* src = value.data<float>();
    int64_t written = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      float* d = dst + slot[i] * width;
      const float* s = src + i * width;
      if (slot[i] == written) {
        std::memcpy(d, s, sizeof(float) * width);
        ++written;
      } else {
        for (int64_t j = 0; j < width; ++j) d[j] += s[j];
      }
    }
  }
  *out.mutable_rows() = std::move(unique_rows);
  return out;
}

}  // namespace fleet
