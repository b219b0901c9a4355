// PsClient::DenseShares: a dense push's gradients written by the caller straight into the slots
// of the memory shared with the servers, which the push then sends from (client.h). Without
// them a push copies the caller's packed gradients into the slots itself: 1.7 MB a CTR-DNN step
// on top of the caller's own gather of the gradients.

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ps/client/client.h"
#include "ps/client/detail/client_call.h"
#include "ps/client/detail/dense_share_slots.h"

namespace fleet::ps {

PsClient::DenseShares::DenseShares(uint32_t table_id, const DenseRoute* route)
    : table_id_(table_id), route_(route), slots_(std::make_unique<Slots>()) {}

PsClient::DenseShares::~DenseShares() {
  if (slots_->pushed) return;
  // No server ever saw these slots: they are free again at once.
  for (const auto& lease : slots_->leases) {
    if (lease != nullptr) lease->Release();
  }
}

absl::Status PsClient::DenseShares::Write(uint64_t offset, const float* values, uint64_t n,
                                          bool add) {
  const DenseLayout& layout = route_->layout;
  if (offset > layout.dim || n > layout.dim - offset) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense shares of table ", table_id_, ": [", offset, ", ", offset + n,
                     ") is past the table's ", layout.dim, " floats"));
  }
  while (n > 0) {
    const uint64_t block = offset / layout.block_size;
    const uint64_t within = offset - layout.BlockBegin(block);
    const uint64_t take = std::min(n, layout.BlockLength(block) - within);
    const uint32_t server = route_->block_server[block];
    float* to = reinterpret_cast<float*>(slots_->leases[server]->grads()) +
                route_->block_position[block] + within;
    if (add) {
      for (uint64_t i = 0; i < take; ++i) to[i] += values[i];
    } else {
      std::memcpy(to, values, take * sizeof(float));
    }
    offset += take;
    values += take;
    n -= take;
  }
  return absl::OkStatus();
}

void PsClient::DenseShares::Fill(float value) {
  for (size_t s = 0; s < slots_->leases.size(); ++s) {
    if (slots_->leases[s] == nullptr) continue;
    float* share = reinterpret_cast<float*>(slots_->leases[s]->grads());
    std::fill(share, share + route_->local_size[s], value);
  }
}

void PsClient::DenseShares::Scale(float factor) {
  for (size_t s = 0; s < slots_->leases.size(); ++s) {
    if (slots_->leases[s] == nullptr) continue;
    float* share = reinterpret_cast<float*>(slots_->leases[s]->grads());
    for (size_t i = 0; i < route_->local_size[s]; ++i) share[i] *= factor;
  }
}

std::unique_ptr<PsClient::DenseShares> PsClient::TakeDenseShares(uint32_t table_id) {
  auto route = Dense(table_id);
  if (!route.ok()) return nullptr;
  std::unique_ptr<DenseShares> shares(new DenseShares(table_id, *route));
  shares->slots_->leases.resize(num_servers());
  for (size_t s = 0; s < num_servers(); ++s) {
    if ((*route)->blocks[s].empty()) continue;
    if (!shared_memory(s)) return nullptr;
    // Slots taken so far go back when `shares` goes.
    shares->slots_->leases[s] = detail::ShmSlots::Acquire(shm_[s]);
    if (shares->slots_->leases[s] == nullptr) return nullptr;
  }
  return shares;
}

Future PsClient::PushDense(uint32_t table_id, std::unique_ptr<DenseShares> grads, PushKind kind) {
  return PushDenseAndMaybePull(table_id, {}, kind, {}, std::move(grads));
}

Future PsClient::PushPullDense(uint32_t table_id, std::unique_ptr<DenseShares> grads,
                               absl::Span<float> out, PushKind kind) {
  if (kind != PushKind::kGradient && kind != PushKind::kDelta) {
    return Future::Failed(absl::InvalidArgumentError(absl::StrCat(
        "PushPullDense of table ", table_id, " as ", detail::PushCallName(kind, "PushDense"),
        ": only a push of gradients or deltas returns values")));
  }
  if (out.empty()) {
    return Future::Failed(absl::InvalidArgumentError(
        absl::StrCat("PushPullDense of table ", table_id, ": no output for the values")));
  }
  return PushDenseAndMaybePull(table_id, {}, kind, out, std::move(grads));
}

}  // namespace fleet::ps
