#include "ps/table/sparse_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "core/prefetch.h"
#include "ps/table/detail/magnitude.h"
#include "ps/table/detail/rule_kernels.h"
#include "ps/table/shard_load.h"
#include "ps/table/ssd/tier.h"

namespace fleet::ps {
namespace {

// memcpy of a row of n floats in constant-size 32-byte pieces, which the compiler turns into
// vector moves: a row's length is known only at run time, and a call to the C library's memcpy
// for each 64-byte row of a load cost more than the copy.
inline void CopyFloats(float* dst, const float* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) std::memcpy(dst + i, src + i, 8 * sizeof(float));
  if (i < n) std::memcpy(dst + i, src + i, (n - i) * sizeof(float));
}

// Whether some row[i] + delta[i] of i < n would have a MagnitudeBits above `bits` (a NaN is above
// every bound): AnyMagnitudeAbove of the sums, computed without storing them, so that a GEO delta
// in range is added in place with no copy of the row kept for the overflow guard.
inline bool AnySumMagnitudeAbove(const float* row, const float* delta, size_t n, uint32_t bits) {
  const int32_t limit = static_cast<int32_t>(bits);
  int32_t signs = 0;
  for (size_t i = 0; i < n; ++i) {
    signs |= limit - static_cast<int32_t>(detail::MagnitudeBits(row[i] + delta[i]));
  }
  return signs < 0;
}

}  // namespace

bool AllFinite(absl::Span<const float> values) {
  return !detail::ScanMagnitudeAbove(values.data(), values.size(), detail::kInfinityBits - 1);
}

absl::StatusOr<std::unique_ptr<SparseTable>> SparseTable::Create(const proto::TableConfig& config) {
  const std::string name =
      absl::StrCat("sparse table ", config.table_id(), " '", config.name(), "'");
  if (config.type() != proto::SPARSE) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": config type is not SPARSE"));
  }
  if (config.dim() == 0 || config.dim() > (uint64_t{1} << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": dim must be in [1, 2^24], got ", config.dim()));
  }
  if (config.num_shards() > kMaxShards) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": num_shards must be at most ",
                                                   kMaxShards, ", got ", config.num_shards()));
  }
  auto rule = MakeUpdateRule(config.optimizer());
  if (!rule.ok())
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", rule.status().message()));
  auto init = Initializer::Create(config.initializer());
  if (!init.ok())
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", init.status().message()));
  if (auto s = detail::CheckOverflowConfig(config, name); !s.ok()) return s;
  const std::string& storage = config.storage();
  if (!storage.empty() && storage != "memory" && storage != "ssd") {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": storage must be \"memory\" or \"ssd\", got \"", storage, "\""));
  }
  std::unique_ptr<SparseTable> table(new SparseTable(config, std::move(*rule), *init));
  if (storage == "ssd") {
    auto tier = ssd::Tier::Open(config, static_cast<uint32_t>(table->width_),
                                static_cast<uint32_t>(table->shards_.size()));
    if (!tier.ok()) return tier.status();
    table->tier_ = std::move(*tier);
  }
  return table;
}

SparseTable::~SparseTable() = default;

SparseTable::SparseTable(const proto::TableConfig& config, std::unique_ptr<UpdateRule> rule,
                         Initializer initializer)
    : config_(config),
      rule_(std::move(rule)),
      initializer_(initializer),
      dim_(config.dim()),
      width_(config.dim() + rule_->StateDim(config.dim())),
      min_count_(config.count_filter().min_count()) {
  const uint32_t num_shards = config.num_shards() == 0 ? 16 : config.num_shards();
  for (uint32_t s = 0; s < num_shards; ++s) shards_.push_back(std::make_unique<Shard>(width_));
  shard_magic_ = UINT64_MAX / num_shards + 1;
}

std::string SparseTable::Name() const {
  return absl::StrCat("sparse table ", config_.table_id(), " '", config_.name(), "'");
}

std::unique_ptr<SparseTable::Groups> SparseTable::GroupByShard(absl::Span<const int64_t> keys) {
  std::unique_ptr<Groups> g;
  {
    std::lock_guard<std::mutex> lock(groups_mu_);
    if (!idle_groups_.empty()) {
      g = std::move(idle_groups_.back());
      idle_groups_.pop_back();
    }
  }
  if (!g) g = std::make_unique<Groups>();
  const size_t n = keys.size();
  const size_t num_shards = shards_.size();
  // A counting sort by (shard, top bits of the hash). The top bits order a shard's keys by
  // where they land in its index (RowStore buckets grow with the hash's high half), so the
  // probes of consecutive keys fall on nearby index pages instead of all over it.
  // About 8 keys a bucket, at most 256 buckets a shard: finer costs more in counting than it
  // gains in locality (measured flat from 64 to 4096 buckets at 100k keys).
  int order_bits = 0;
  while (order_bits < 8 && (num_shards << (order_bits + 1)) * 8 <= n) ++order_bits;
  const size_t num_buckets = num_shards << order_bits;
  g->bucket_begin.assign(num_buckets + 1, 0);
  g->hash_of.resize(n);
  g->bucket_of.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t hash = detail::RowStore::Hash(keys[i]);
    const uint32_t bucket = static_cast<uint32_t>(
        (ShardOf(hash) << order_bits) | (order_bits == 0 ? 0 : hash >> (64 - order_bits)));
    g->hash_of[i] = hash;
    g->bucket_of[i] = bucket;
    ++g->bucket_begin[bucket + 1];
  }
  for (size_t b = 0; b < num_buckets; ++b) g->bucket_begin[b + 1] += g->bucket_begin[b];
  g->begin.resize(num_shards + 1);
  for (size_t s = 0; s <= num_shards; ++s) g->begin[s] = g->bucket_begin[s << order_bits];
  g->keys.resize(n);
  g->hashes.resize(n);
  g->order.resize(n);
  g->candidates.resize(n);
  uint32_t* next = g->bucket_begin.data();  // becomes the end of each bucket
  for (size_t i = 0; i < n; ++i) {
    const uint32_t j = next[g->bucket_of[i]]++;
    g->keys[j] = keys[i];
    g->hashes[j] = g->hash_of[i];
    g->order[j] = static_cast<uint32_t>(i);
  }
  return g;
}

void SparseTable::ReleaseGroups(std::unique_ptr<Groups> groups) {
  constexpr size_t kMaxIdle = 16;
  std::lock_guard<std::mutex> lock(groups_mu_);
  if (idle_groups_.size() < kMaxIdle) idle_groups_.push_back(std::move(groups));
}

void SparseTable::ProbeShard(const detail::RowStore& rows, Groups& g, size_t s, size_t floats) {
  const uint32_t begin = g.begin[s], end = g.begin[s + 1];
  rows.ProbeCandidates(g.hashes.data() + begin, end - begin, g.candidates.data() + begin);
  for (uint32_t j = begin; j < end && j < begin + kRowAhead; ++j) {
    rows.PrefetchCandidate(g.candidates[j], floats);
  }
}

float* SparseTable::ConfirmAt(const detail::RowStore& rows, const Groups& g, uint32_t j,
                              uint32_t end, size_t floats) {
  if (j + kRowAhead < end) rows.PrefetchCandidate(g.candidates[j + kRowAhead], floats);
  return rows.Confirm(g.keys[j], g.hashes[j], g.candidates[j]);
}

float* SparseTable::FindOrCreateRow(Shard& shard, int64_t key, uint64_t hash, uint32_t stamp) {
  bool created = false;
  float* row = shard.rows.FindOrInsert(key, hash, stamp, &created);
  if (created) {
    initializer_.Fill(key, 0, dim_, row);
    rule_->InitState(dim_, row + dim_);
  }
  return row;
}

absl::Status SparseTable::Pull(absl::Span<const int64_t> keys, absl::Span<float> out) {
  if (out.size() != keys.size() * dim_) {
    return absl::InvalidArgumentError(absl::StrCat(Name(), ": pull of ", keys.size(),
                                                   " keys needs ", keys.size() * dim_,
                                                   " output floats, got ", out.size()));
  }
  std::unique_ptr<Groups> groups = GroupByShard(keys);
  absl::Status status = PullGrouped(*groups, out);
  ReleaseGroups(std::move(groups));
  return status;
}

void SparseTable::SortByRequestOrder(const Groups& g, std::vector<uint32_t>* positions) {
  std::sort(positions->begin(), positions->end(),
            [&g](uint32_t a, uint32_t b) { return g.order[a] < g.order[b]; });
}

absl::Status SparseTable::CheckTierRequest(const Groups& g) const {
  if (!tier_) return absl::OkStatus();
  for (size_t s = 0; s < shards_.size(); ++s) {
    size_t keys = g.begin[s + 1] - g.begin[s];
    if (keys > tier_->shard_capacity()) {  // repeats need no row of their own: count distinct
      std::vector<int64_t> distinct(g.keys.begin() + g.begin[s], g.keys.begin() + g.begin[s + 1]);
      std::sort(distinct.begin(), distinct.end());
      keys = std::unique(distinct.begin(), distinct.end()) - distinct.begin();
    }
    if (auto status = tier_->CheckRequest(s, keys); !status.ok()) {
      return absl::Status(status.code(), absl::StrCat(Name(), ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status SparseTable::TierBefore(Groups& g, size_t s) {
  if (!tier_ || g.missing.empty()) return absl::OkStatus();
  std::vector<int64_t> keys;
  keys.reserve(g.missing.size());
  for (const uint32_t j : g.missing) keys.push_back(g.keys[j]);
  return tier_->Promote(s, shards_[s]->rows, keys);
}

absl::Status SparseTable::TierAfter(const Groups& g, size_t s, size_t missed, bool is_pull) {
  if (!tier_) return absl::OkStatus();
  const uint32_t begin = g.begin[s], end = g.begin[s + 1];
  tier_->Touch(s, absl::MakeConstSpan(g.keys.data() + begin, end - begin), end - begin - missed,
               is_pull);
  auto status = tier_->Evict(s, shards_[s]->rows);
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(Name(), ": ", status.message()));
}

absl::Status SparseTable::PullGrouped(Groups& g, absl::Span<float> out) {
  const uint32_t stamp = epoch_.load(std::memory_order_relaxed);
  if (auto status = CheckTierRequest(g); !status.ok()) return status;
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (g.begin[s] == g.begin[s + 1]) continue;
    Shard& shard = *shards_[s];
    std::lock_guard<std::mutex> lock(shard.mu);
    ProbeShard(shard.rows, g, s, dim_);
    g.missing.clear();
    for (uint32_t j = g.begin[s]; j < g.begin[s + 1]; ++j) {
      const float* row = ConfirmAt(shard.rows, g, j, g.begin[s + 1], dim_);
      if (row == nullptr) {
        g.missing.push_back(j);
      } else {
        std::memcpy(out.data() + size_t{g.order[j]} * dim_, row, dim_ * sizeof(float));
      }
    }
    // Rows on disk (storage "ssd") move to memory first; the loop below finds them.
    if (auto status = TierBefore(g, s); !status.ok()) return status;
    // Absent keys are created in request order, not in the hash order of the loop above:
    // inserting keys sorted by hash piles them into one run of a linear-probing index while it
    // grows (quadratic probing time). A repeat finds the row its first occurrence created.
    SortByRequestOrder(g, &g.missing);
    for (const uint32_t j : g.missing) {
      const int64_t key = g.keys[j];
      float* dst = out.data() + size_t{g.order[j]} * dim_;
      // Without the count filter every absent key gets its row: one probe finds the slot that
      // a repeat's first occurrence filled or the empty one the new row takes (a GEO job's pulls
      // are mostly of rows nobody has pulled yet).
      float* row = min_count_ <= 1 ? FindOrCreateRow(shard, key, g.hashes[j], stamp)
                                   : shard.rows.Find(key, g.hashes[j]);
      if (row == nullptr && min_count_ > 1) {
        auto it = shard.pending.try_emplace(key, 0).first;
        if (++it->second < min_count_) {
          std::memset(dst, 0, dim_ * sizeof(float));
          continue;
        }
        shard.pending.erase(it);
        row = FindOrCreateRow(shard, key, g.hashes[j], stamp);  // admitted: absent, so created
      }
      if (row == nullptr) {
        return absl::ResourceExhaustedError(absl::StrCat(Name(), ": shard ", s, " is full"));
      }
      std::memcpy(dst, row, dim_ * sizeof(float));
    }
    if (auto status = TierAfter(g, s, g.missing.size(), true); !status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status SparseTable::CheckPush(absl::Span<const int64_t> keys, absl::Span<const float> grads,
                                    bool is_delta) const {
  const char* what = is_delta ? "deltas" : "gradients";
  if (grads.size() != keys.size() * dim_) {
    return absl::InvalidArgumentError(absl::StrCat(Name(), ": push of ", keys.size(),
                                                   " keys needs ", keys.size() * dim_, " ", what,
                                                   " (dim ", dim_, "), got ", grads.size()));
  }
  if (!AllFinite(grads)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": ", what, " contain NaN or infinity; push rejected"));
  }
  return absl::OkStatus();
}

absl::Status SparseTable::Push(absl::Span<const int64_t> keys, absl::Span<const float> grads,
                               bool is_delta) {
  return CheckAndPush(keys, grads, is_delta, {});
}

absl::Status SparseTable::CheckAndPush(absl::Span<const int64_t> keys,
                                       absl::Span<const float> grads, bool is_delta,
                                       absl::Span<float> values_after) {
  if (auto status = CheckPush(keys, grads, is_delta); !status.ok()) return status;
  if (!is_delta) rule_->BeginUpdate();  // one step of a learning-rate schedule per push
  std::unique_ptr<Groups> groups = GroupByShard(keys);
  absl::Status status = PushGrouped(*groups, grads, is_delta, values_after);
  ReleaseGroups(std::move(groups));
  return status;
}

absl::Status SparseTable::PushAndPull(absl::Span<const int64_t> keys, absl::Span<const float> grads,
                                      bool is_delta, absl::Span<float> values_after) {
  if (values_after.size() != keys.size() * dim_) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": push-and-pull of ", keys.size(), " keys needs ", keys.size() * dim_,
                     " output floats (dim ", dim_, "), got ", values_after.size()));
  }
  // The count filter's pull counts a held-back key again and may create its row, and the SSD
  // tier may move rows to disk between a push and a pull: both keep the two calls.
  if (min_count_ > 1 || tier_) {
    absl::Status pushed = Push(keys, grads, is_delta);
    if (!pushed.ok() && !absl::IsOutOfRange(pushed)) return pushed;
    absl::Status pulled = Pull(keys, values_after);
    return pulled.ok() ? pushed : pulled;
  }
  return CheckAndPush(keys, grads, is_delta, values_after);
}

bool SparseTable::ApplyPush(float* row, const float* grad, bool is_delta, uint32_t stamp,
                            detail::OverflowGuard* guard) {
  // A delta changes the value alone (the rule's state, 22 of CTR-DNN's 32 floats a row under
  // Adam, is left as it was). In range, the common case, it is added in place; otherwise it
  // goes through the guard below, which refuses or clips the same sums.
  if (is_delta && !AnySumMagnitudeAbove(row, grad, dim_, detail::MagnitudeBits(guard->bound()))) {
    for (size_t k = 0; k < dim_; ++k) row[k] += grad[k];
    detail::RowStore::SetStamp(row, stamp);
    return true;
  }
  const size_t changed = is_delta ? dim_ : width_;
  // The row is in cache here: keeping a copy costs a few ns, far less than fetching it did.
  guard->Keep(row, changed);
  if (is_delta) {
    for (size_t k = 0; k < dim_; ++k) row[k] += grad[k];
  } else {
    rule_->Update(dim_, row, row + dim_, grad);
  }
  if (!guard->Check(row, changed)) return false;
  detail::RowStore::SetStamp(row, stamp);
  return true;
}

absl::Status SparseTable::PushGrouped(Groups& g, absl::Span<const float> grads, bool is_delta,
                                      absl::Span<float> values_after) {
  const uint32_t stamp = epoch_.load(std::memory_order_relaxed);
  detail::OverflowGuard guard(config_.overflow());
  uint64_t refused = 0;
  uint32_t first_refused = 0;  // request position of the first refused key
  // PushAndPull: every key meets a row here (it runs without the count filter and the tier).
  const bool copy_out = !values_after.empty();
  if (copy_out) g.rows.resize(g.keys.size());
  auto apply = [&](float* row, uint32_t j) {
    if (copy_out) g.rows[j] = row;
    if (!ApplyPush(row, grads.data() + size_t{g.order[j]} * dim_, is_delta, stamp, &guard) &&
        (refused++ == 0 || g.order[j] < first_refused)) {
      first_refused = g.order[j];
    }
  };
  // What a push reads of each row, and so prefetches: a delta (GEO) adds to the value alone, a
  // gradient's update reads and writes the rule's state too.
  const size_t floats = is_delta ? dim_ : width_;
  if (auto status = CheckTierRequest(g); !status.ok()) return status;
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (g.begin[s] == g.begin[s + 1]) continue;
    Shard& shard = *shards_[s];
    std::lock_guard<std::mutex> lock(shard.mu);
    ProbeShard(shard.rows, g, s, floats);
    g.missing.clear();
    for (uint32_t j = g.begin[s]; j < g.begin[s + 1]; ++j) {
      // The gradients sit in request order, so reading them in shard order misses too.
      if (j + kRowAhead < g.begin[s + 1]) {
        PrefetchForRead(grads.data() + size_t{g.order[j + kRowAhead]} * dim_);
      }
      float* row = ConfirmAt(shard.rows, g, j, g.begin[s + 1], floats);
      if (row != nullptr) {
        apply(row, j);
      } else if (min_count_ <= 1 || tier_) {  // else not admitted yet: the gradient is dropped
        g.missing.push_back(j);               // (a row on disk was admitted: the tier looks first)
      }
    }
    // A push to rows on disk: they move to memory and are updated there, under this lock.
    if (auto status = TierBefore(g, s); !status.ok()) return status;
    // Created in request order, as in PullGrouped; repeats are applied in order.
    SortByRequestOrder(g, &g.missing);
    for (const uint32_t j : g.missing) {
      float* row = min_count_ <= 1 ? FindOrCreateRow(shard, g.keys[j], g.hashes[j], stamp)
                                   : shard.rows.Find(g.keys[j], g.hashes[j]);
      if (row == nullptr && min_count_ > 1) continue;  // not admitted: dropped
      if (row == nullptr) {
        return absl::ResourceExhaustedError(absl::StrCat(Name(), ": shard ", s, " is full"));
      }
      apply(row, j);
    }
    // After the shard's last push, so that a repeated key reads as all its repeats left it. The
    // rows were just written: the copy finds them in cache (rows never move while inserted).
    for (uint32_t j = g.begin[s]; copy_out && j < g.begin[s + 1]; ++j) {
      std::memcpy(values_after.data() + size_t{g.order[j]} * dim_, g.rows[j], dim_ * sizeof(float));
    }
    if (auto status = TierAfter(g, s, g.missing.size(), false); !status.ok()) return status;
  }
  if (refused == 0) return absl::OkStatus();
  int64_t key = 0;
  for (uint32_t j = 0; j < g.keys.size(); ++j) {
    if (g.order[j] == first_refused) key = g.keys[j];
  }
  return absl::OutOfRangeError(
      absl::StrCat(Name(), ": the update of key ", key,
                   refused > 1 ? absl::StrCat(" and ", refused - 1, " other keys") : "",
                   " would take a weight or optimizer state past ", guard.bound(),
                   " (float overflow from finite ", is_delta ? "deltas" : "gradients",
                   "); those rows were left as they were, the rest of the push was applied"));
}

absl::StatusOr<uint64_t> SparseTable::Save(const std::string& path, proto::SaveMode mode) {
  uint32_t cycle;
  auto rows = WritePart(path, mode, &cycle);
  if (rows.ok()) CommitCycle(cycle);
  return rows;
}

void SparseTable::CommitCycle(uint32_t cycle) {
  // Later cycles win: committing an older save after a newer one must not widen the delta.
  uint32_t since = delta_since_.load();
  while (since < cycle + 1 && !delta_since_.compare_exchange_weak(since, cycle + 1)) {
  }
}

absl::StatusOr<uint64_t> SparseTable::WritePart(const std::string& path, proto::SaveMode mode,
                                                uint32_t* cycle, bool end_cycle) {
  TableFileHeader header = NewTableFileHeader();
  header.table_id = id();
  header.table_type = proto::SPARSE;
  header.save_mode = mode;
  header.rule = config_.optimizer().rule_case();
  header.dim = dim_;
  // A values-only part keeps the first dim_ floats of each record: the value, not the state.
  const size_t floats = mode == proto::VALUES ? dim_ : width_;
  header.row_floats = floats;
  const uint32_t start = end_cycle ? epoch_.fetch_add(1) : epoch_.load();
  header.epoch = start;
  const uint32_t since = mode == proto::DELTA ? delta_since_.load() : 0;
  auto writer = TableFileWriter::Open(path, header);
  if (!writer.ok()) return writer.status();
  uint64_t rows = 0;
  absl::Status status;
  for (size_t s = 0; s < shards_.size(); ++s) {
    Shard& shard = *shards_[s];
    std::lock_guard<std::mutex> lock(shard.mu);
    shard.rows.ForEach([&](int64_t key, uint32_t stamp, const float* data) {
      if (!status.ok() || stamp < since) return;
      status = (*writer)->AppendRecord(key, data, floats);
      ++rows;
    });
    if (!status.ok()) return status;
    // The shard's rows on disk, under the same lock: none moves between the two meanwhile.
    if (tier_) {
      absl::Status read = tier_->ForEachOnDisk(s, [&](const ssd::DiskRow& r) {
        if (!status.ok() || r.stamp < since) return;
        status = (*writer)->AppendRecord(r.key, r.data, floats);
        ++rows;
      });
      if (!read.ok()) return read;
      if (!status.ok()) return status;
    }
  }
  if (auto s = (*writer)->Finish(rows); !s.ok()) return s;
  if (end_cycle) *cycle = start;
  return rows;
}

absl::Status SparseTable::CheckPart(const TableFileReader& part) const {
  const TableFileHeader& h = part.header();
  // A values-only part fits any rule (the state starts afresh); others must match this one's.
  const bool values_only = h.save_mode == proto::VALUES;
  const bool layout_ok = values_only
                             ? h.row_floats == dim_
                             : h.row_floats == width_ &&
                                   h.rule == static_cast<uint32_t>(config_.optimizer().rule_case());
  if (h.table_id != id() || h.table_type != proto::SPARSE || h.dim != dim_ || !layout_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        part.path(), " holds table ", h.table_id, " (type ", h.table_type, ", dim ", h.dim, ", ",
        h.row_floats, " floats a row, rule ", h.rule, "); ", Name(), " expects dim ", dim_, ", ",
        width_, " floats a row, rule ", config_.optimizer().rule_case()));
  }
  const uint64_t record = SparseRecordBytes(h);
  if (part.body_bytes() % record != 0 || part.body_bytes() / record != h.row_count) {
    return absl::DataLossError(absl::StrCat(part.path(), " holds ", part.body_bytes(),
                                            " bytes of records, its header says ", h.row_count,
                                            " rows of ", record, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status SparseTable::InsertRecords(size_t shard_index, const RecordBlock& block,
                                        absl::Span<const uint32_t> records, uint32_t stamp,
                                        uint64_t* inserted) {
  if (records.empty()) return absl::OkStatus();
  // CheckPart allowed width_ floats a record, or dim_ (values only: the state starts afresh).
  const size_t floats = block.row_floats;
  std::vector<float> fresh_state;
  if (floats < width_) {
    fresh_state.resize(width_ - dim_);
    rule_->InitState(dim_, fresh_state.data());
  }
  auto key_of = [&](uint32_t r) {
    int64_t key;
    std::memcpy(&key, block.data + r * block.stride, sizeof(key));
    return key;
  };
  Shard& shard = *shards_[shard_index];
  std::lock_guard<std::mutex> lock(shard.mu);
  if (tier_) {
    // Rows on disk that the block replaces move to memory first, to be loaded over.
    std::vector<int64_t> keys;
    keys.reserve(records.size());
    for (uint32_t r : records) keys.push_back(key_of(r));
    if (auto s = tier_->Loaded(shard_index, shard.rows, keys); !s.ok()) return s;
  }
  // Each record's index slot is prefetched a few records ahead, so that the cache misses of the
  // probes overlap: one probe after another was 40% of a 4M-row load.
  constexpr size_t kSlotAhead = 16;
  uint64_t inserted_here = 0;  // in a register, not through `inserted` once a row
  for (size_t i = 0; i < records.size(); ++i) {
    if (i + kSlotAhead < records.size()) {
      shard.rows.PrefetchSlot(block.hashes[records[i + kSlotAhead]]);
    }
    const uint32_t r = records[i];
    const float* record = block.data + r * block.stride;
    const int64_t key = key_of(r);
    bool created;
    float* row = shard.rows.FindOrInsert(key, block.hashes[r], stamp, &created);
    if (row == nullptr) return absl::ResourceExhaustedError(absl::StrCat(Name(), " is full"));
    CopyFloats(row, record + 2, floats);
    if (floats < width_) {
      std::memcpy(row + dim_, fresh_state.data(), fresh_state.size() * sizeof(float));
    }
    if (!created) detail::RowStore::SetStamp(row, stamp);  // a new row has it already
    if (!shard.pending.empty()) shard.pending.erase(key);
    ++inserted_here;
  }
  *inserted += inserted_here;
  if (tier_) {
    if (auto s = tier_->Evict(shard_index, shard.rows); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status SparseTable::ReserveShards(size_t first, size_t last, uint64_t rows_per_shard,
                                        uint64_t total_rows) {
  // An SSD table keeps no more than its budget in memory: the rest go to disk as they load.
  const uint64_t share =
      tier_ ? std::min<uint64_t>(rows_per_shard, tier_->shard_capacity()) : rows_per_shard;
  for (size_t i = first; i < last; ++i) {
    Shard& shard = *shards_[i];
    std::lock_guard<std::mutex> lock(shard.mu);
    try {
      shard.rows.Reserve(shard.rows.size() + share + share / 16);
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError(
          absl::StrCat(Name(), ": out of memory reserving room for ", total_rows, " rows"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> SparseTable::Load(absl::Span<TableFileReader* const> parts,
                                           absl::FunctionRef<bool(int64_t)> keep) {
  return LoadParts(*this, parts, &keep);
}

absl::StatusOr<uint64_t> SparseTable::Load(absl::Span<TableFileReader* const> parts) {
  return LoadParts(*this, parts, nullptr);
}

uint64_t SparseTable::RowCount() const {
  uint64_t rows = 0;
  for (const auto& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard->mu);
    rows += shard->rows.size();
  }
  return rows + (tier_ ? tier_->rows_on_disk() : 0);
}

void SparseTable::Clear() {
  for (auto& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard->mu);
    shard->rows.Clear();
    shard->pending.clear();
  }
  // A failure to clear the disk shows at the load that called this (DropAllRows clears again).
  if (tier_) tier_->Clear().IgnoreError();
}

absl::Status SparseTable::DropAllRows() {
  Clear();
  return tier_ ? tier_->Clear() : absl::OkStatus();
}

uint64_t SparseTable::Shrink(uint32_t max_unseen_saves) {
  const uint32_t now = epoch_.load();
  uint64_t removed = 0;
  for (size_t s = 0; s < shards_.size(); ++s) {
    Shard& shard = *shards_[s];
    std::lock_guard<std::mutex> lock(shard.mu);
    removed += shard.rows.RemoveIf([&](int64_t key, uint32_t stamp, const float*) {
      const bool drop = stamp < now && now - stamp > max_unseen_saves;
      if (drop && tier_) tier_->Forget(s, key);
      return drop;
    });
    // Copies on disk of rows in memory go first, so that the compaction below drops (and
    // counts) only rows whose home is disk. A failure only miscounts `removed`.
    if (tier_) tier_->DropStaleCopies(s).IgnoreError();
  }
  // Rows on disk by the same rule (stamp < now - max_unseen_saves), through a compaction
  // filter: RocksDB drops them as it rewrites its files, none read into this process.
  if (tier_ && now > max_unseen_saves) {
    auto dropped = tier_->DropStampedBefore(now - max_unseen_saves);
    if (dropped.ok()) removed += *dropped;
  }
  return removed;
}

proto::TableStats SparseTable::Stats() const {
  proto::TableStats stats;
  stats.set_table_id(id());
  stats.set_type(proto::SPARSE);
  uint64_t rows = 0, bytes = 0, pending = 0;
  for (const auto& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard->mu);
    rows += shard->rows.size();
    bytes += shard->rows.MemoryBytes() + sizeof(Shard) +
             shard->pending.capacity() * (sizeof(std::pair<int64_t, uint32_t>) + 1);
    pending += shard->pending.size();
  }
  stats.set_rows(rows + (tier_ ? tier_->rows_on_disk() : 0));
  stats.set_bytes(bytes);
  if (tier_) tier_->AddStats(rows, &stats);
  stats.set_filtered_keys(pending);
  return stats;
}

}  // namespace fleet::ps
