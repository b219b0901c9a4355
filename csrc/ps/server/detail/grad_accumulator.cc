#include "ps/server/detail/grad_accumulator.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"

namespace fleet::ps::detail {

GradAccumulator::Sparse& GradAccumulator::SparseOf(uint32_t table_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = sparse_[table_id];
  if (!slot) slot = std::make_unique<Sparse>();
  return *slot;
}

GradAccumulator::Dense& GradAccumulator::DenseOf(uint32_t table_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = dense_[table_id];
  if (!slot) slot = std::make_unique<Dense>();
  return *slot;
}

absl::Status GradAccumulator::AddSparse(uint32_t table_id, absl::Span<const int64_t> keys,
                                        absl::Span<const float> grads) {
  auto table = tables_->Sparse(table_id);
  if (!table.ok()) return table.status();
  const size_t dim = (*table)->dim();
  if (grads.size() != keys.size() * dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse table ", table_id, ": ", keys.size(), " keys of dim ", dim, " need ",
                     keys.size() * dim, " gradients, got ", grads.size()));
  }
  if (!AllFinite(grads)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse table ", table_id, ": gradients contain NaN or infinity; push rejected"));
  }
  Sparse& acc = SparseOf(table_id);
  std::lock_guard<std::mutex> lock(acc.mu);
  acc.dim = dim;
  // absl's clear() frees a map of more than 127 slots, so each round's index would grow again
  // from nothing through a dozen rehashes, the last of them often in the round's last push,
  // which the step's barrier waits for. A round's keys are about the last one's: room for them
  // once, in the round's first push.
  if (acc.keys.empty()) acc.row_of.reserve(std::max(acc.last_round_keys, keys.size()));
  for (size_t i = 0; i < keys.size(); ++i) {
    auto [it, inserted] = acc.row_of.try_emplace(keys[i], static_cast<uint32_t>(acc.keys.size()));
    if (inserted) {
      acc.keys.push_back(keys[i]);
      acc.sums.insert(acc.sums.end(), grads.begin() + i * dim, grads.begin() + (i + 1) * dim);
    } else {
      float* sum = acc.sums.data() + static_cast<size_t>(it->second) * dim;
      const float* g = grads.data() + i * dim;
      for (size_t j = 0; j < dim; ++j) sum[j] += g[j];
    }
  }
  return absl::OkStatus();
}

absl::Status GradAccumulator::AddDense(uint32_t table_id, absl::Span<const float> grads) {
  auto table = tables_->Dense(table_id);
  if (!table.ok()) return table.status();
  if (grads.size() != (*table)->local_size()) {
    return absl::InvalidArgumentError(absl::StrCat("dense table ", table_id, ": this server holds ",
                                                   (*table)->local_size(),
                                                   " floats, the push sent ", grads.size()));
  }
  if (!AllFinite(grads)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dense table ", table_id, ": gradients contain NaN or infinity; push rejected"));
  }
  Dense& acc = DenseOf(table_id);
  std::lock_guard<std::mutex> lock(acc.mu);
  if (!acc.any) {
    acc.sums.assign(grads.begin(), grads.end());
    acc.any = true;
  } else {
    for (size_t i = 0; i < grads.size(); ++i) acc.sums[i] += grads[i];
  }
  return absl::OkStatus();
}

absl::Status GradAccumulator::ApplyAll(float scale, absl::Span<const StepOutput> outputs) {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<uint32_t, std::vector<absl::Span<float>>> outs_of;  // by dense table
  for (const StepOutput& output : outputs) outs_of[output.dense_table].push_back(output.values);
  // One task per table, with its own status slot, so that the result does not depend on which
  // thread ran what; a dense table's task spreads its blocks over the pool in turn.
  std::vector<std::function<absl::Status()>> tasks;
  for (auto& [table_id, acc] : sparse_) {
    tasks.push_back(
        [this, id = table_id, acc = acc.get(), scale] { return ApplySparse(id, *acc, scale); });
  }
  for (auto& [table_id, acc] : dense_) {
    auto it = outs_of.find(table_id);
    absl::Span<const absl::Span<float>> outs;
    if (it != outs_of.end()) outs = it->second;
    tasks.push_back([this, id = table_id, acc = acc.get(), scale, outs] {
      return ApplyDense(id, *acc, scale, outs);
    });
  }
  for (const auto& [table_id, outs] : outs_of) {  // a table nobody pushed to yet
    if (dense_.count(table_id) == 0) {
      tasks.push_back([this, id = table_id, &outs = outs] { return CopyDense(id, outs); });
    }
  }
  std::vector<absl::Status> results(tasks.size());
  pool_.ParallelFor(tasks.size(), [&](size_t i) { results[i] = tasks[i](); });
  for (const absl::Status& result : results) {
    if (!result.ok()) return result;
  }
  for (const StepOutput& output : outputs) {
    if (output.written != nullptr) *output.written = true;
  }
  return absl::OkStatus();
}

absl::Status GradAccumulator::ApplySparse(uint32_t table_id, Sparse& acc, float scale) {
  std::lock_guard<std::mutex> entry_lock(acc.mu);
  if (acc.keys.empty()) return absl::OkStatus();
  for (float& g : acc.sums) g *= scale;
  auto table = tables_->Sparse(table_id);
  absl::Status status = table.ok() ? PushSparseInParts(**table, acc) : table.status();
  acc.last_round_keys = acc.keys.size();
  acc.keys.clear();
  acc.sums.clear();
  acc.row_of.clear();
  return status;
}

absl::Status GradAccumulator::PushSparseInParts(SparseTable& table, Sparse& acc) {
  const size_t shards = table.num_shards();
  const size_t parts = std::min(shards, kSparsePartsPerThread * pool_.threads());
  // A learning-rate schedule steps once per push, so a table with one takes the round as one
  // push; so do a pool of one thread and a round too small to be worth the copies.
  if (pool_.threads() < 2 || parts < 2 || acc.keys.size() < kMinKeysToSplit ||
      table.config().optimizer().has_schedule()) {
    return table.Push(acc.keys, acc.sums, false);
  }
  // Whole shards per part, each part's keys in the round's order: the table meets every shard's
  // keys in the order one push would (rows are created in that order, each from its own key),
  // and updates each row once with the same gradient, so the rows end the same bit for bit.
  // A stable counting sort by part into buffers the table keeps from round to round.
  const size_t dim = acc.dim;
  const size_t n = acc.keys.size();
  acc.part_of.resize(n);
  std::vector<size_t> begin(parts + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const size_t part = table.ShardOf(SparseTable::KeyHash(acc.keys[i])) * parts / shards;
    acc.part_of[i] = static_cast<uint32_t>(part);
    ++begin[part + 1];
  }
  for (size_t part = 0; part < parts; ++part) begin[part + 1] += begin[part];
  acc.part_keys.resize(n);
  acc.part_sums.resize(n * dim);
  std::vector<size_t> next(begin.begin(), begin.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    const size_t j = next[acc.part_of[i]]++;
    acc.part_keys[j] = acc.keys[i];
    std::memcpy(acc.part_sums.data() + j * dim, acc.sums.data() + i * dim, dim * sizeof(float));
  }
  const absl::Span<const int64_t> keys(acc.part_keys);
  const absl::Span<const float> sums(acc.part_sums);
  std::vector<absl::Status> results(parts);
  pool_.ParallelFor(parts, [&](size_t part) {
    const size_t count = begin[part + 1] - begin[part];
    if (count == 0) return;
    results[part] = table.Push(keys.subspan(begin[part], count),
                               sums.subspan(begin[part] * dim, count * dim), false);
  });
  for (const absl::Status& result : results) {
    if (!result.ok()) return result;
  }
  return absl::OkStatus();
}

absl::Status GradAccumulator::ApplyDense(uint32_t table_id, Dense& acc, float scale,
                                         absl::Span<const absl::Span<float>> outs) {
  std::lock_guard<std::mutex> entry_lock(acc.mu);
  if (!acc.any) return CopyDense(table_id, outs);
  acc.any = false;
  float* sums = acc.sums.data();
  const size_t size = acc.sums.size();
  pool_.ParallelFor((size + kScaleChunk - 1) / kScaleChunk, [&](size_t chunk) {
    const size_t end = std::min(size, (chunk + 1) * kScaleChunk);
    for (size_t i = chunk * kScaleChunk; i < end; ++i) sums[i] *= scale;
  });
  auto table = tables_->Dense(table_id);
  if (!table.ok()) return table.status();
  return (*table)->PushAndCopy(
      acc.sums,
      [this](size_t n, const std::function<void(size_t)>& task) { pool_.ParallelFor(n, task); },
      outs);
}

absl::Status GradAccumulator::CopyDense(uint32_t table_id,
                                        absl::Span<const absl::Span<float>> outs) {
  if (outs.empty()) return absl::OkStatus();
  auto table = tables_->Dense(table_id);
  if (!table.ok()) return table.status();
  for (const absl::Span<float> out : outs) {
    if (absl::Status pulled = (*table)->Pull(out); !pulled.ok()) return pulled;
  }
  return absl::OkStatus();
}

void GradAccumulator::CountPush() {
  absl::MutexLock lock(&count_mu_);
  ++pushes_counted_;
}

absl::Status GradAccumulator::AwaitPushes(uint32_t announced, absl::Time deadline) {
  absl::MutexLock lock(&count_mu_);
  pushes_announced_ += announced;
  auto all_in = [this]() ABSL_SHARED_LOCKS_REQUIRED(count_mu_) {
    return pushes_counted_ >= pushes_announced_;
  };
  if (count_mu_.AwaitWithDeadline(absl::Condition(&all_in), deadline)) return absl::OkStatus();
  const uint64_t expected = pushes_announced_;
  const uint64_t counted = pushes_counted_;
  pushes_announced_ -= announced;
  return absl::DeadlineExceededError(absl::StrCat(
      "sync step: the workers arrived so far announced ", expected,
      " accumulate pushes to this server, ", counted,
      " reached it before the step's deadline (a push lost on the way, or its worker died)"));
}

void GradAccumulator::ResetPushCounts() {
  absl::MutexLock lock(&count_mu_);
  pushes_counted_ = 0;
  pushes_announced_ = 0;
}

}  // namespace fleet::ps::detail
