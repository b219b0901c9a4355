#include "distributed/detail/geo_communicator.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace fleet::distributed::detail {

LocalRows::LocalRows(size_t dim, std::unique_ptr<ps::UpdateRule> rule)
    : dim_(dim),
      state_dim_(rule->StateDim(dim)),
      width_(2 * dim + rule->StateDim(dim)),
      rule_(std::move(rule)),
      shards_(new Shard[kShards]) {}

size_t LocalRows::ShardIndex(int64_t key) { return absl::HashOf(key) % kShards; }

LocalRows::Shard& LocalRows::ShardOf(int64_t key) const { return shards_[ShardIndex(key)]; }

float* LocalRows::Row(Shard& shard, int64_t key) const {
  auto it = shard.row_of.find(key);
  return it == shard.row_of.end() ? nullptr : shard.rows.data() + it->second * width_;
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

template <class Visit>
void LocalRows::ForEachByShard(absl::Span<const int64_t> keys, Visit&& visit) const {
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
  }
}

std::vector<size_t> LocalRows::Read(absl::Span<const int64_t> keys, absl::Span<float> out) const {
  std::vector<size_t> missing;
  ForEachByShard(keys, [&](Shard& shard, size_t i) {
    const float* row = Row(shard, keys[i]);
    if (row == nullptr) {
      missing.push_back(i);
    } else {
      std::memcpy(out.data() + i * dim_, row, dim_ * sizeof(float));
    }
  });
  std::sort(missing.begin(), missing.end());  // in the keys' order, as before the grouping
  return missing;
}

void LocalRows::Reset(absl::Span<const int64_t> keys, absl::Span<const float> values) {
  for (size_t i = 0; i < keys.size(); ++i) {
    Shard& shard = ShardOf(keys[i]);
    std::lock_guard<std::mutex> lock(shard.mu);
    float* row = Row(shard, keys[i]);
    if (row == nullptr) {
      shard.row_of.emplace(keys[i], shard.rows.size() / width_);
      shard.rows.resize(shard.rows.size() + width_);
      row = shard.rows.data() + shard.rows.size() - width_;
      rule_->InitState(dim_, row + 2 * dim_);
    }
    std::memcpy(row, values.data() + i * dim_, dim_ * sizeof(float));
    std::memcpy(row + dim_, values.data() + i * dim_, dim_ * sizeof(float));
  }
}

void LocalRows::Update(absl::Span<const int64_t> keys, absl::Span<const float> grads) {
  // Sum the gradients of repeated ids first, as the servers do, so that a stateful rule (Adam)
  // sees one gradient per row and step.
  absl::flat_hash_map<int64_t, size_t> first;
  std::vector<int64_t> unique;
  std::vector<float> sums;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto [it, inserted] = first.try_emplace(keys[i], unique.size());
    const float* g = grads.data() + i * dim_;
    if (inserted) {
      unique.push_back(keys[i]);
      sums.insert(sums.end(), g, g + dim_);
    } else {
      float* sum = sums.data() + it->second * dim_;
      for (size_t j = 0; j < dim_; ++j) sum[j] += g[j];
    }
  }
  ForEachByShard(unique, [&](Shard& shard, size_t i) {
    float* row = Row(shard, unique[i]);
    FLEET_ENFORCE(row != nullptr, Internal, "GEO push of id ", unique[i],
                  " that was never pulled on this worker");
    rule_->Update(dim_, row, row + 2 * dim_, sums.data() + i * dim_);
    shard.touched.insert(unique[i]);
  });
}

void LocalRows::TakeDeltas(float scale, std::vector<int64_t>* keys, std::vector<float>* deltas) {
  keys->clear();
  deltas->clear();
  for (size_t s = 0; s < kShards; ++s) {
    Shard& shard = shards_[s];
    std::lock_guard<std::mutex> lock(shard.mu);
    for (int64_t key : shard.touched) {
      const float* row = Row(shard, key);
      keys->push_back(key);
      for (size_t j = 0; j < dim_; ++j) deltas->push_back(scale * (row[j] - row[dim_ + j]));
    }
    shard.touched.clear();
  }
}

GeoCommunicator::GeoCommunicator(CommunicatorConfig config, std::shared_ptr<ps::PsClient> client,
                                 Scope* root)
    : CommunicatorBase(std::move(config), std::move(client), root) {
  FLEET_ENFORCE(config_.geo_steps > 0, InvalidArgument,
                "GEO communicator: update frequency (k_steps) must be positive, got ",
                config_.geo_steps);
  for (const SparseVar& var : config_.sparse) {
    auto rule = ps::MakeUpdateRule(var.local_rule);
    ThrowIfError(rule.status(), absl::StrCat("GEO local optimizer of '", var.name, "'"));
    local_[var.table_id] = std::make_unique<LocalRows>(var.dim, std::move(*rule));
    // The first step's rate: the schedule's rate at its `begin` (AfterStep steps on from there).
    local_[var.table_id]->StepSchedule();
  }
}

LocalRows& GeoCommunicator::Local(uint32_t table_id) {
  auto it = local_.find(table_id);
  FLEET_ENFORCE(it != local_.end(), NotFound, "GEO communicator: no sparse table ", table_id);
  return *it->second;
}

void GeoCommunicator::StartThreads() {
  // Start() pulled the dense values into the root scope: they are the first synced values.
  dense_synced_.resize(dense_size());
  if (dense_size() > 0) ReadDenseParams(dense_synced_.data());
}

void GeoCommunicator::PullSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                                 absl::Span<float> out, bool from_servers) {
  if (from_servers) {
    PullFromServers(table_id, keys, out);
    return;
  }
  LocalRows& local = Local(table_id);
  std::vector<size_t> missing = local.Read(keys, out);
  if (missing.empty()) return;
  const size_t dim = Sparse(table_id).dim;
  std::vector<int64_t> absent(missing.size());
  for (size_t i = 0; i < missing.size(); ++i) absent[i] = keys[missing[i]];
  std::vector<float> rows(absent.size() * dim);
  PullFromServers(table_id, absent, absl::MakeSpan(rows));
  local.Reset(absent, rows);
  for (size_t i = 0; i < missing.size(); ++i) {
    std::memcpy(out.data() + missing[i] * dim, rows.data() + i * dim, dim * sizeof(float));
  }
}

void GeoCommunicator::PushSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                                 absl::Span<const float> grads) {
  CheckPushSize(table_id, keys, grads);
  Local(table_id).Update(keys, grads);
}

void GeoCommunicator::SendDense(int thread, const std::vector<const LoDTensor*>& grads) {
  throw InvalidArgument(
      "GEO mode updates dense parameters locally: the program must not send dense gradients "
      "(was it rewritten for another mode?)");
}

void GeoCommunicator::Exchange() {
  std::lock_guard<std::mutex> lock(exchange_mu_);
  // Every worker trained a full step size from the same values: the servers add the average of
  // their changes (geo-SGD's model averaging, as Paddle's GEO scales deltas by 1/trainers).
  const float scale = 1.0f / static_cast<float>(config_.num_workers);
  std::vector<ps::Future> pushes;
  std::vector<std::string> what;
  std::vector<std::vector<int64_t>> keys(config_.sparse.size());
  std::vector<std::vector<float>> deltas(config_.sparse.size());
  for (size_t t = 0; t < config_.sparse.size(); ++t) {
    const SparseVar& var = config_.sparse[t];
    Local(var.table_id).TakeDeltas(scale, &keys[t], &deltas[t]);
    if (keys[t].empty()) continue;
    pushes.push_back(client_->PushSparse(var.table_id, keys[t], deltas[t], ps::PushKind::kDelta));
    what.push_back(absl::StrCat("GEO push of '", var.name, "' deltas"));
  }
  std::vector<float> dense_delta;
  if (dense_size() > 0) {
    dense_delta.resize(dense_size());
    ReadDenseParams(dense_delta.data());
    for (size_t i = 0; i < dense_delta.size(); ++i) {
      dense_delta[i] = scale * (dense_delta[i] - dense_synced_[i]);
    }
    pushes.push_back(
        client_->PushDense(*config_.dense_table_id, dense_delta, ps::PushKind::kDelta));
    what.push_back("GEO push of the dense deltas");
  }
  for (size_t i = 0; i < pushes.size(); ++i) WaitOk(pushes[i], what[i]);
  // Fresh values: everything the other workers pushed meanwhile, on the rows this one touched.
  for (size_t t = 0; t < config_.sparse.size(); ++t) {
    if (keys[t].empty()) continue;
    const SparseVar& var = config_.sparse[t];
    std::vector<float> rows(keys[t].size() * var.dim);
    PullFromServers(var.table_id, keys[t], absl::MakeSpan(rows));
    Local(var.table_id).Reset(keys[t], rows);
  }
  if (dense_size() > 0) PullDenseIntoRoot(&dense_synced_);
}

void GeoCommunicator::AfterStep(const framework::StepInfo& info) {
  // A step of the worker (of any of its threads) is a step of the local schedules, as it is one
  // run of the program's increment op, whatever k_steps is.
  for (auto& [table_id, local] : local_) local->StepSchedule();
  const int64_t step = steps_.fetch_add(1) + 1;
  if (step % config_.geo_steps == 0) Exchange();
}

void GeoCommunicator::OnPassEnd() {
  if (dataset_pass_ && !failed()) Exchange();
}

void GeoCommunicator::Flush() { Exchange(); }

void GeoCommunicator::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (failed()) return;  // after a failed step nothing more is pushed
  try {
    Flush();
    Leave();
  } catch (const std::exception& e) {
    MarkFailed(e.what());
    throw;
  }
}

}  // namespace fleet::distributed::detail
