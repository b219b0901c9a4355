#include "distributed/detail/local_rows.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace fleet::distributed::detail {
namespace {

// sum += g, element by element (a batch's repeated ids; CTR-DNN repeats most of its ids).
void AddTo(float* __restrict sum, const float* __restrict g, size_t n) {
  for (size_t k = 0; k < n; ++k) sum[k] += g[k];
}

// The key at the first of a shard's `positions` whose row index is `absent`, for the error that
// names it.
int64_t FirstAbsentKey(absl::Span<const int64_t> keys, const uint32_t* positions, size_t n,
                       const uint32_t* index, uint32_t absent) {
  return keys[*std::find_if(positions, positions + n,
                            [&](uint32_t i) { return index[i] == absent; })];
}

}  // namespace

LocalRows::LocalRows(size_t dim, std::unique_ptr<ps::UpdateRule> rule)
    : dim_(dim),
      synced_(dim + rule->StateDim(dim)),
      stride_(StrideOf(synced_ + dim)),
      rule_(std::move(rule)),
      shards_(new Shard[kShards]) {}

size_t LocalRows::StrideOf(size_t width) {
  constexpr size_t kLineFloats = kLineBytes / sizeof(float);
  size_t padded = (width + kLineFloats - 1) / kLineFloats * kLineFloats;
  if (width < kLineFloats) {
    padded = 1;
    while (padded < width) padded *= 2;
  }
  return 4 * padded <= 5 * width ? padded : width;
}

void LocalRows::Group(absl::Span<const int64_t> keys, Lookup* lookup) const {
  lookup->owner_ = nullptr;  // until it is whole (an allocation may throw on the way)
  lookup->keys_.assign(keys.begin(), keys.end());
  std::vector<uint64_t>& hashes = lookup->hashes_;
  hashes.resize(keys.size());
  std::vector<uint32_t>& index = lookup->index_;  // the shard of each position, for now
  index.resize(keys.size());
  std::array<uint32_t, kShards + 1>& begin = lookup->begin_;
  begin.fill(0);
  for (size_t i = 0; i < keys.size(); ++i) {
    hashes[i] = LocalRowsIndex::Hash(keys[i]);
    index[i] = static_cast<uint32_t>(LocalRowsIndex::ShardOf(hashes[i]));
    ++begin[index[i] + 1];
  }
  for (size_t s = 0; s < kShards; ++s) begin[s + 1] += begin[s];
  std::array<uint32_t, kShards> next;
  std::copy(begin.begin(), begin.end() - 1, next.begin());
  lookup->order_.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    lookup->order_[next[index[i]]++] = static_cast<uint32_t>(i);
  }
  std::fill(index.begin(), index.end(), kAbsent);
  lookup->owner_ = this;
}

bool LocalRows::Holds(const Lookup& lookup, absl::Span<const int64_t> keys) const {
  return lookup.owner_ == this && lookup.keys_.size() == keys.size() &&
         std::equal(keys.begin(), keys.end(), lookup.keys_.begin());
}

size_t LocalRows::AbsentEnd(const Lookup& lookup, size_t s, size_t from) {
  size_t end = from;
  while (end < lookup.absent_.size() &&
         LocalRowsIndex::ShardOf(lookup.hashes_[lookup.absent_[end]]) == s) {
    ++end;
  }
  return end;
}

size_t LocalRows::Find(const Shard& shard, absl::Span<const int64_t> keys, const uint64_t* hashes,
                       const uint32_t* positions, size_t n, uint32_t* index) {
  size_t absent = 0;
  for (size_t j = 0; j < n; ++j) {
    if (j + kProbeAhead < n) shard.row_of.Prefetch(hashes[positions[j + kProbeAhead]]);
    const uint32_t i = positions[j];
    index[i] = shard.row_of.Find(keys[i], hashes[i]);
    absent += index[i] == kAbsent;
  }
  return absent;
}

template <class Visit>
void LocalRows::ForEachShard(absl::Span<const int64_t> keys, const Lookup* lookup,
                             Visit&& visit) const {
  Lookup local;
  const bool known = lookup != nullptr && Holds(*lookup, keys);
  if (!known) Group(keys, &local);
  const Lookup& where = known ? *lookup : local;
  const uint32_t* order = where.order_.data();
  // Known rows as the Lookup found them; the rest are looked up here.
  std::vector<uint32_t> index = where.index_;
  size_t next_absent = 0;  // into where.absent_, which lists its positions shard by shard
  for (size_t s = 0; s < kShards; ++s) {
    const uint32_t from = where.begin_[s], to = where.begin_[s + 1];
    if (from == to) continue;
    Shard& shard = shards_[s];
    std::lock_guard<std::mutex> lock(shard.mu);
    size_t absent;
    if (known) {
      const size_t end = AbsentEnd(where, s, next_absent);
      absent = Find(shard, keys, where.hashes_.data(), where.absent_.data() + next_absent,
                    end - next_absent, index.data());
      next_absent = end;
    } else {
      absent = Find(shard, keys, where.hashes_.data(), order + from, to - from, index.data());
    }
    visit(shard, order + from, static_cast<size_t>(to - from), index.data(), absent);
  }
}

std::vector<size_t> LocalRows::Read(absl::Span<const int64_t> keys, absl::Span<float> out,
                                    Lookup* lookup) const {
  return Probe(keys, out.data(), lookup);
}

std::vector<size_t> LocalRows::Absent(absl::Span<const int64_t> keys, Lookup* lookup) const {
  return Probe(keys, nullptr, lookup);
}

std::vector<size_t> LocalRows::Probe(absl::Span<const int64_t> keys, float* out,
                                     Lookup* lookup) const {
  Lookup local;
  Lookup& where = lookup != nullptr ? *lookup : local;
  // A Lookup of these keys (GEO's prefetch took one of this batch a few steps ago) keeps the
  // rows it found: only those it lacked are looked up, and its absent_ keeps those still absent.
  const bool known = Holds(where, keys);
  if (!known) {
    Group(keys, &where);
    where.absent_.clear();
  }
  const uint32_t* order = where.order_.data();
  uint32_t* index = where.index_.data();
  size_t next_absent = 0;  // known: where the next shard's run of the old absent_ starts
  size_t kept = 0;         // known: the old absent_ entries still absent, moved to its front
  for (size_t s = 0; s < kShards; ++s) {
    const uint32_t from = where.begin_[s], to = where.begin_[s + 1];
    if (from == to) continue;
    const Shard& shard = shards_[s];
    std::lock_guard<std::mutex> lock(shard.mu);
    if (known) {
      const size_t end = AbsentEnd(where, s, next_absent);
      Find(shard, keys, where.hashes_.data(), where.absent_.data() + next_absent, end - next_absent,
           index);
      for (size_t a = next_absent; a < end; ++a) {
        if (index[where.absent_[a]] == kAbsent) where.absent_[kept++] = where.absent_[a];
      }
      next_absent = end;
    } else {
      const size_t absent = Find(shard, keys, where.hashes_.data(), order + from, to - from, index);
      for (uint32_t j = from; j < to && absent > 0; ++j) {
        if (index[order[j]] == kAbsent) where.absent_.push_back(order[j]);
      }
    }
    if (out == nullptr) continue;
    for (uint32_t j = from; j < to; ++j) {
      if (j + kPrefetchAhead < to && index[order[j + kPrefetchAhead]] != kAbsent) {
        __builtin_prefetch(RowAt(shard, index[order[j + kPrefetchAhead]]));
      }
      const uint32_t i = order[j];
      if (index[i] != kAbsent) {
        std::memcpy(out + i * dim_, RowAt(shard, index[i]), dim_ * sizeof(float));
      }
    }
  }
  if (known) where.absent_.resize(kept);
  std::vector<size_t> missing(where.absent_.begin(), where.absent_.end());
  std::sort(missing.begin(), missing.end());  // in the keys' order, as before the grouping
  return missing;
}

void LocalRows::Reset(absl::Span<const int64_t> keys, absl::Span<const float> values) {
  Insert(keys, values, /*overwrite=*/true, /*read_back=*/nullptr);
}

void LocalRows::InsertAbsent(absl::Span<const int64_t> keys, absl::Span<const float> values) {
  Insert(keys, values, /*overwrite=*/false, /*read_back=*/nullptr);
}

void LocalRows::InsertAbsentOrRead(absl::Span<const int64_t> keys, absl::Span<float> values) {
  FLEET_ENFORCE(values.size() == keys.size() * dim_, InvalidArgument,
                "GEO local rows: ", keys.size(), " keys of dim ", dim_, " need ",
                keys.size() * dim_, " values to insert, got ", values.size());
  Insert(keys, values, /*overwrite=*/false, values.data());
}

void LocalRows::Insert(absl::Span<const int64_t> keys, absl::Span<const float> values,
                       bool overwrite, float* read_back) {
  Lookup where;
  Group(keys, &where);
  for (size_t s = 0; s < kShards; ++s) {
    const uint32_t from = where.begin_[s], to = where.begin_[s + 1];
    if (from == to) continue;
    Shard& shard = shards_[s];
    std::lock_guard<std::mutex> lock(shard.mu);
    for (uint32_t j = from; j < to; ++j) {
      const uint32_t i = where.order_[j];
      // A key repeated among the absent ones is inserted once (its later copies find it).
      const auto [index, inserted] =
          shard.row_of.Insert(keys[i], where.hashes_[i], static_cast<uint32_t>(shard.marks.size()));
      if (inserted) {
        shard.rows.Append(stride_);
        shard.marks.emplace_back();
        rule_->InitState(dim_, RowAt(shard, index) + dim_);
      } else if (!overwrite) {
        // Reads in place of position i only: the values of other positions stay as given.
        if (read_back != nullptr) {
          std::memcpy(read_back + i * dim_, RowAt(shard, index), dim_ * sizeof(float));
        }
        continue;
      }
      float* row = RowAt(shard, index);
      std::memcpy(row, values.data() + i * dim_, dim_ * sizeof(float));
      std::memcpy(row + synced_, values.data() + i * dim_, dim_ * sizeof(float));
    }
  }
}

void LocalRows::Update(absl::Span<const int64_t> keys, absl::Span<const float> grads,
                       const Lookup* lookup) {
  // Per shard: the gradients summed per row (sums, one slot per distinct row, in the order of
  // their first key), then the rule's update of the rows, a few at a time.
  std::vector<float> sums;
  std::vector<float*> slot_rows;  // the row of each slot
  ForEachShard(
      keys, lookup,
      [&](Shard& shard, const uint32_t* positions, size_t n, const uint32_t* index, size_t absent) {
        if (absent > 0) {
          throw Internal(absl::StrCat("GEO push of id ",
                                      FirstAbsentKey(keys, positions, n, index, kAbsent),
                                      " that was never pulled on this worker"));
        }
        // Stamps of earlier pushes never equal this one's (0 is no push; after 2^32 - 1 pushes the
        // stamps are cleared).
        if (++shard.pushes == 0) {
          for (RowMarks& marks : shard.marks) marks.push_stamp = 0;
          shard.pushes = 1;
        }
        const uint32_t stamp = shard.pushes;
        sums.clear();
        slot_rows.clear();
        for (size_t j = 0; j < n; ++j) {
          if (j + kProbeAhead < n)
            __builtin_prefetch(&shard.marks[index[positions[j + kProbeAhead]]]);
          const uint32_t i = positions[j];
          RowMarks& marks = shard.marks[index[i]];
          const float* g = grads.data() + i * dim_;
          if (marks.push_stamp != stamp) {
            marks.push_stamp = stamp;
            marks.sum_slot = static_cast<uint32_t>(slot_rows.size());
            slot_rows.push_back(RowAt(shard, index[i]));
            sums.insert(sums.end(), g, g + dim_);
            if (!marks.touched) {
              marks.touched = 1;
              shard.touched_rows.emplace_back(keys[i], index[i]);
            }
          } else {
            AddTo(sums.data() + static_cast<size_t>(marks.sum_slot) * dim_, g, dim_);
          }
        }
        // Chunks of kPrefetchAhead rows: the next chunk's rows are prefetched while the rule
        // updates this one's.
        const size_t slots = slot_rows.size();
        for (size_t first = 0; first < slots; first += kPrefetchAhead) {
          const size_t end = std::min(first + kPrefetchAhead, slots);
          for (size_t ahead = end; ahead < std::min(end + kPrefetchAhead, slots); ++ahead) {
            PrefetchValueAndState(slot_rows[ahead]);
          }
          rule_->UpdateRows(dim_, absl::MakeConstSpan(slot_rows.data() + first, end - first), dim_,
                            sums.data() + first * dim_);
        }
      });
}

void LocalRows::TakeDeltas(float scale, std::vector<int64_t>* keys, std::vector<float>* deltas,
                           Lookup* lookup) {
  keys->clear();
  deltas->clear();
  Lookup unused;
  Lookup& where = lookup != nullptr ? *lookup : unused;
  where.owner_ = nullptr;  // until it is whole
  where.hashes_.clear();
  where.order_.clear();
  where.index_.clear();
  where.absent_.clear();
  where.begin_[0] = 0;
  for (size_t s = 0; s < kShards; ++s) {
    Shard& shard = shards_[s];
    std::lock_guard<std::mutex> lock(shard.mu);
    const auto& touched = shard.touched_rows;
    const size_t first = keys->size();
    keys->resize(first + touched.size());
    deltas->resize(keys->size() * dim_);
    where.hashes_.resize(keys->size());
    where.order_.resize(keys->size());
    where.index_.resize(keys->size());
    for (size_t k = 0; k < touched.size(); ++k) {
      if (k + kPrefetchAhead < touched.size()) {
        PrefetchValueAndSynced(shard, touched[k + kPrefetchAhead].second);
      }
      const auto [key, index] = touched[k];
      float* row = RowAt(shard, index);
      float* delta = deltas->data() + (first + k) * dim_;
      float* synced = row + synced_;
      for (size_t j = 0; j < dim_; ++j) delta[j] = scale * (row[j] - synced[j]);
      std::memcpy(synced, row, dim_ * sizeof(float));
      shard.marks[index].touched = 0;
      (*keys)[first + k] = key;
      where.hashes_[first + k] = LocalRowsIndex::Hash(key);
      where.order_[first + k] = static_cast<uint32_t>(first + k);
      where.index_[first + k] = index;
    }
    shard.touched_rows.clear();
    where.begin_[s + 1] = static_cast<uint32_t>(keys->size());
  }
  where.keys_ = *keys;
  where.owner_ = this;
}

void LocalRows::Rebase(absl::Span<const int64_t> keys, absl::Span<const float> fresh,
                       const Lookup* lookup) {
  ForEachShard(
      keys, lookup,
      [&](Shard& shard, const uint32_t* positions, size_t n, const uint32_t* index, size_t absent) {
        if (absent > 0) {
          throw Internal(absl::StrCat("GEO fresh values of id ",
                                      FirstAbsentKey(keys, positions, n, index, kAbsent),
                                      " that this worker does not hold"));
        }
        for (size_t j = 0; j < n; ++j) {
          if (j + kPrefetchAhead < n) {
            PrefetchValueAndSynced(shard, index[positions[j + kPrefetchAhead]]);
          }
          const uint32_t i = positions[j];
          float* row = RowAt(shard, index[i]);
          float* synced = row + synced_;
          const float* f = fresh.data() + i * dim_;
          for (size_t k = 0; k < dim_; ++k) {
            row[k] = f[k] + (row[k] - synced[k]);
            synced[k] = f[k];
          }
        }
      });
}

}  // namespace fleet::distributed::detail
