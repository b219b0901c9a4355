#include "distributed/detail/local_rows.h"

#include <algorithm>
#include <cstring>

#include "absl/hash/hash.h"
#include "core/status.h"

namespace fleet::distributed::detail {

LocalRows::LocalRows(size_t dim, std::unique_ptr<ps::UpdateRule> rule)
    : dim_(dim),
      width_(2 * dim + rule->StateDim(dim)),
      rule_(std::move(rule)),
      shards_(new Shard[kShards]) {}

size_t LocalRows::ShardIndex(int64_t key) { return absl::HashOf(key) % kShards; }

int64_t LocalRows::IndexOf(const Shard& shard, int64_t key) {
  auto it = shard.row_of.find(key);
  return it == shard.row_of.end() ? -1 : static_cast<int64_t>(it->second);
}

std::vector<uint32_t> LocalRows::ByShard(absl::Span<const int64_t> keys,
                                         std::array<uint32_t, kShards + 1>* begin) const {
  std::vector<uint8_t> shard_of(keys.size());
  begin->fill(0);
  for (size_t i = 0; i < keys.size(); ++i) {
    shard_of[i] = static_cast<uint8_t>(ShardIndex(keys[i]));
    ++(*begin)[shard_of[i] + 1];
  }
  for (size_t s = 0; s < kShards; ++s) (*begin)[s + 1] += (*begin)[s];
  std::array<uint32_t, kShards> next;
  std::copy(begin->begin(), begin->end() - 1, next.begin());
  std::vector<uint32_t> order(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) order[next[shard_of[i]]++] = static_cast<uint32_t>(i);
  return order;
}

template <class Visit, class AfterShard>
void LocalRows::ForEachByShard(absl::Span<const int64_t> keys, Visit&& visit,
                               AfterShard&& after_shard) const {
  std::array<uint32_t, kShards + 1> begin;
  const std::vector<uint32_t> order = ByShard(keys, &begin);
  for (size_t s = 0; s < kShards; ++s) {
    if (begin[s] == begin[s + 1]) continue;
    Shard& shard = shards_[s];
    std::lock_guard<std::mutex> lock(shard.mu);
    for (uint32_t j = begin[s]; j < begin[s + 1]; ++j) {
      if (j + kPrefetchAhead < begin[s + 1]) {
        shard.row_of.prefetch(keys[order[j + kPrefetchAhead]]);
      }
      visit(shard, order[j]);
    }
    after_shard(shard);
  }
}

std::vector<size_t> LocalRows::Read(absl::Span<const int64_t> keys, absl::Span<float> out) const {
  std::vector<size_t> missing;
  ForEachByShard(
      keys,
      [&](Shard& shard, size_t i) {
        const int64_t index = IndexOf(shard, keys[i]);
        if (index < 0) {
          missing.push_back(i);
        } else {
          std::memcpy(out.data() + i * dim_, RowAt(shard, index), dim_ * sizeof(float));
        }
      },
      [](Shard&) {});
  std::sort(missing.begin(), missing.end());  // in the keys' order, as before the grouping
  return missing;
}

void LocalRows::Reset(absl::Span<const int64_t> keys, absl::Span<const float> values) {
  ForEachByShard(
      keys,
      [&](Shard& shard, size_t i) {
        int64_t index = IndexOf(shard, keys[i]);
        if (index < 0) {
          index = static_cast<int64_t>(shard.push_stamp.size());
          shard.row_of.emplace(keys[i], static_cast<uint32_t>(index));
          shard.rows.resize(shard.rows.size() + width_);
          shard.push_stamp.push_back(0);
          shard.sum_slot.push_back(0);
          shard.touched.push_back(0);
          rule_->InitState(dim_, RowAt(shard, index) + 2 * dim_);
        }
        float* row = RowAt(shard, index);
        std::memcpy(row, values.data() + i * dim_, dim_ * sizeof(float));
        std::memcpy(row + dim_, values.data() + i * dim_, dim_ * sizeof(float));
      },
      [](Shard&) {});
}

void LocalRows::Update(absl::Span<const int64_t> keys, absl::Span<const float> grads) {
  // Per shard: the gradients summed per row (sums, one slot per distinct row, in the order of
  // their first key), then one rule update per row.
  std::vector<float> sums;
  std::vector<uint32_t> slot_rows;  // the row of each slot
  bool first_of_shard = true;
  uint32_t stamp = 0;
  ForEachByShard(
      keys,
      [&](Shard& shard, size_t i) {
        if (first_of_shard) {
          first_of_shard = false;
          // Stamps of earlier pushes never equal this one's (0 is no push; after 2^32 - 1
          // pushes the stamps are cleared).
          if (++shard.pushes == 0) {
            std::fill(shard.push_stamp.begin(), shard.push_stamp.end(), 0);
            shard.pushes = 1;
          }
          stamp = shard.pushes;
          sums.clear();
          slot_rows.clear();
        }
        const int64_t index = IndexOf(shard, keys[i]);
        FLEET_ENFORCE(index >= 0, Internal, "GEO push of id ", keys[i],
                      " that was never pulled on this worker");
        const float* g = grads.data() + i * dim_;
        if (shard.push_stamp[index] != stamp) {
          shard.push_stamp[index] = stamp;
          shard.sum_slot[index] = static_cast<uint32_t>(slot_rows.size());
          slot_rows.push_back(static_cast<uint32_t>(index));
          sums.insert(sums.end(), g, g + dim_);
          if (!shard.touched[index]) {
            shard.touched[index] = 1;
            shard.touched_rows.emplace_back(keys[i], static_cast<uint32_t>(index));
          }
        } else {
          float* sum = sums.data() + static_cast<size_t>(shard.sum_slot[index]) * dim_;
          for (size_t j = 0; j < dim_; ++j) sum[j] += g[j];
        }
      },
      [&](Shard& shard) {
        for (size_t slot = 0; slot < slot_rows.size(); ++slot) {
          float* row = RowAt(shard, slot_rows[slot]);
          rule_->Update(dim_, row, row + 2 * dim_, sums.data() + slot * dim_);
        }
        first_of_shard = true;
      });
}

void LocalRows::TakeDeltas(float scale, std::vector<int64_t>* keys, std::vector<float>* deltas) {
  keys->clear();
  deltas->clear();
  for (size_t s = 0; s < kShards; ++s) {
    Shard& shard = shards_[s];
    std::lock_guard<std::mutex> lock(shard.mu);
    for (const auto& [key, index] : shard.touched_rows) {
      float* row = RowAt(shard, index);
      keys->push_back(key);
      for (size_t j = 0; j < dim_; ++j) deltas->push_back(scale * (row[j] - row[dim_ + j]));
      std::memcpy(row + dim_, row, dim_ * sizeof(float));
      shard.touched[index] = 0;
    }
    shard.touched_rows.clear();
  }
}

void LocalRows::Rebase(absl::Span<const int64_t> keys, absl::Span<const float> fresh) {
  ForEachByShard(
      keys,
      [&](Shard& shard, size_t i) {
        const int64_t index = IndexOf(shard, keys[i]);
        FLEET_ENFORCE(index >= 0, Internal, "GEO fresh values of id ", keys[i],
                      " that this worker does not hold");
        float* row = RowAt(shard, index);
        const float* f = fresh.data() + i * dim_;
        for (size_t j = 0; j < dim_; ++j) {
          row[j] = f[j] + (row[j] - row[dim_ + j]);
          row[dim_ + j] = f[j];
        }
      },
      [](Shard&) {});
}

}  // namespace fleet::distributed::detail
