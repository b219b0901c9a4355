// PsClient's sync step: one barrier request to every server that applies the step's accumulated
// gradients and may carry back the dense table's values (in the reply, or in the memory shared
// with a server on this host).

#include <atomic>
#include <optional>

#include "absl/strings/str_cat.h"
#include "ps/client/client.h"
#include "ps/client/detail/client_call.h"
#include "ps/client/detail/dense_wire.h"
#include "ps/client/detail/shm_slots.h"

namespace fleet::ps {
namespace {

// The reply's dense values stay in the received slices until copied once into their blocks.
using SyncStepCall = detail::Call<
    proto::BarrierRequest,
    detail::SliceFieldReply<proto::BarrierReply, proto::BarrierReply::kValuesFieldNumber>>;

}  // namespace

absl::StatusOr<uint32_t> PsClient::SyncStep(uint32_t num_workers, uint32_t worker_id, bool done,
                                            absl::Duration timeout,
                                            absl::Span<const Future> pushes) {
  return SyncStepAndMaybePull(num_workers, worker_id, done, timeout, std::nullopt, {}, pushes);
}

absl::StatusOr<uint32_t> PsClient::SyncStepAndPullDense(uint32_t num_workers, uint32_t worker_id,
                                                        absl::Duration timeout, uint32_t table_id,
                                                        absl::Span<float> out,
                                                        absl::Span<const Future> pushes) {
  return SyncStepAndMaybePull(num_workers, worker_id, /*done=*/false, timeout, table_id, out,
                              pushes);
}

absl::StatusOr<uint32_t> PsClient::SyncStepAndMaybePull(uint32_t num_workers, uint32_t worker_id,
                                                        bool done, absl::Duration timeout,
                                                        std::optional<uint32_t> table_id,
                                                        absl::Span<float> out,
                                                        absl::Span<const Future> pushes) {
  const DenseRoute* route = nullptr;
  if (table_id) {
    auto route_or = Dense(*table_id);
    if (!route_or.ok()) return route_or.status();
    route = *route_or;
    if (out.size() != route->layout.dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("sync step (worker ", worker_id, ") pulling dense table ", *table_id,
                       ": the table has ", route->layout.dim, " floats, the output ", out.size()));
    }
  }
  auto state = std::make_shared<detail::CallState>(static_cast<int>(num_servers()),
                                                   /*cancellable=*/!pushes.empty());
  // Every server reports the same count (each saw the same arrivals); keep the smallest.
  auto done_workers = std::make_shared<std::atomic<uint32_t>>(num_workers);
  for (size_t s = 0; s < num_servers(); ++s) {
    auto* call = new SyncStepCall;
    call->request.set_name("__sync_step__");
    call->request.set_num_workers(num_workers);
    call->request.set_worker_id(worker_id);
    call->request.set_timeout_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(timeout)));
    call->request.set_apply_accumulated(true);
    call->request.set_done(done);
    call->request.set_accumulate_pushes(accumulate_sent_[s].exchange(0));
    // A server on this host writes the values after the round's update into a slot of the
    // memory it shares with this worker; the reply then carries only the status.
    std::shared_ptr<detail::ShmSlots::Lease> lease;
    if (route != nullptr) {
      call->request.set_pull_dense(true);
      call->request.set_pull_dense_table(*table_id);
      const uint64_t local_bytes = route->local_size[s] * sizeof(float);
      if (shm_[s] != nullptr && local_bytes > 0) lease = detail::ShmSlots::Acquire(shm_[s]);
      if (lease != nullptr) {
        call->request.set_shm_segment(lease->segment_id());
        proto::ShmRange* range = call->request.mutable_shm_values();
        range->set_offset(lease->values_offset());
        range->set_length(local_bytes);
      }
    }
    Launch(s, absl::StrCat("sync step (worker ", worker_id, ")"), timeout + options_.rpc_timeout,
           call,
           detail::WireStarter<SyncStepCall>{transport_->channels[s].get(),
                                             detail::PsMethod("Barrier")},
           state, [done_workers, route, s, out, lease](const auto& reply) {
             const uint32_t done_here = reply.header().done_workers();
             uint32_t seen = done_workers->load();
             while (done_here < seen && !done_workers->compare_exchange_weak(seen, done_here)) {
             }
             if (route == nullptr) return absl::OkStatus();
             if (lease == nullptr) {
               // A server holding no block of the table sends no values.
               return CopyDenseBlocks(reply.values(), *route, s, out);
             }
             CopyDenseBlocks(lease->values(), *route, s, out);
             lease->Release();
             return absl::OkStatus();
           });
  }
  const Future step(state);
  if (!pushes.empty() && !step.WaitFor(options_.rpc_timeout)) {
    // Each push ends within its RPC timeout; one that failed leaves the step waiting for pushes
    // that will not come (or for a server that does not answer).
    for (const Future& push : pushes) {
      absl::Status pushed = push.Wait();
      if (pushed.ok()) continue;
      state->Cancel();
      step.Wait().IgnoreError();
      return pushed;
    }
  }
  absl::Status status = step.Wait();
  for (const Future& push : pushes) {
    if (absl::Status pushed = push.Wait(); !pushed.ok()) return pushed;
  }
  if (!status.ok()) return status;
  return done_workers->load();
}

}  // namespace fleet::ps
