#pragma once
// A dense table: `dim` floats cut into blocks of `dense_block_size`, each block living on one
// server (sharding.h; round robin by default). This object holds one server's blocks, each as
// [values | update-rule state] under its own lock, and exchanges them as one flat vector: the
// server's blocks concatenated in increasing block order ("local order").

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fleet/ps/ps.pb.h"
#include "ps/sharding.h"
#include "ps/table/detail/dense_rate_scale.h"
#include "ps/table/initializer.h"
#include "ps/table/table_file.h"
#include "ps/table/update_rule.h"

namespace fleet::ps {

class DenseTable {
 public:
  // The blocks of server `server_index` of `num_servers` under `block_to_server`, initialised
  // with the initializer (element i of the table is element i of key 0). InvalidArgument naming
  // the table for a wrong type, a zero dim or a bad optimizer/initializer; ResourceExhausted
  // when its blocks need more memory than is available (checked before allocating).
  static absl::StatusOr<std::unique_ptr<DenseTable>> Create(const proto::TableConfig& config,
                                                            uint32_t server_index,
                                                            uint32_t num_servers,
                                                            const BlockShardFn& block_to_server);

  // Bytes the blocks of server `server_index` of `num_servers` would take (for block sharding
  // that spreads blocks evenly, as round robin does), without allocating. UINT64_MAX when the
  // config is too large to count or invalid.
  static uint64_t EstimateBytes(const proto::TableConfig& config, uint32_t num_servers);

  uint32_t id() const { return config_.table_id(); }
  const proto::TableConfig& config() const { return config_; }
  const DenseLayout& layout() const { return layout_; }
  // Floats this server holds (the sum of its block lengths).
  size_t local_size() const { return local_size_; }

  // Copies this server's values, in local order, to out (local_size floats). Thread-safe.
  absl::Status Pull(absl::Span<float> out) const;
  // Applies gradients (or adds deltas) given in local order. Thread-safe. InvalidArgument, with
  // the table unchanged, for a size mismatch or a NaN or infinite value.
  absl::Status Push(absl::Span<const float> grads, bool is_delta);
  // Push of gradients (or, with is_delta, deltas added as they are: GEO's exchange), and the
  // values it leaves in each block written to `out` (local order, local_size floats) under that
  // block's lock by the update's own loop (a block whose values change after it, by a
  // per-parameter rate or the overflow guard, is copied after): one pass over the table where
  // Push then Pull make two. The values are those a Pull right after the push returns when no
  // other push comes between; with concurrent pushes each block holds this push's update and
  // those before it on that block. Thread-safe. Errors as Push's (and InvalidArgument for an
  // `out` of the wrong size, before anything changes); after an error `out` holds nothing to use.
  absl::Status PushAndPull(absl::Span<const float> grads, absl::Span<float> out,
                           bool is_delta = false);
  // Calls task(i) for every i in [0, n), each exactly once, from any threads, and returns once
  // every call has (the server's detail::RoundPool::ParallelFor, for one).
  using ForEach = std::function<void(size_t n, const std::function<void(size_t)>& task)>;
  // Push(grads, false) with the blocks' checks and updates run as one task per block through
  // `for_each`, for a caller with idle cores (sync training's round, applied while every worker
  // waits). The values and state are those of Push bit for bit: each block is updated once, by
  // one task, with its own overflow guard, and the rule's schedule steps once. Thread-safe;
  // errors as Push's.
  absl::Status Push(absl::Span<const float> grads, const ForEach& for_each);
  // Push(grads, for_each), and the values it leaves in each block written to every span of
  // `outs` (local order, local_size floats each) by the block's own task right after its update,
  // as PushAndPull writes its `out`: sync training's round hands each waiting worker its values
  // while the block is in cache, instead of each worker pulling the whole table after the round.
  // Thread-safe. Errors as Push's (and InvalidArgument for an out of the wrong size, before
  // anything changes); after an error the outs hold nothing to use.
  absl::Status PushAndCopy(absl::Span<const float> grads, const ForEach& for_each,
                           absl::Span<const absl::Span<float>> outs);
  // Sets the values (local order) while the table still holds its initial ones (never pushed to,
  // initialised or loaded); afterwards does nothing. Returns whether it set them. Thread-safe.
  absl::StatusOr<bool> Initialize(absl::Span<const float> values);

  // Writes this server's blocks (values and state) to `path` as a base part: dense tables always
  // save every block. Returns the blocks written.
  absl::StatusOr<uint64_t> Save(const std::string& path) const;
  // Reads the blocks this server owns from parts written on any number of servers (same dim,
  // block size and update rule, checked before anything changes). NotFound when one of its
  // blocks is in no part. Returns the blocks loaded.
  absl::StatusOr<uint64_t> Load(absl::Span<TableFileReader* const> parts);

  proto::TableStats Stats() const;

 private:
  struct Block {
    uint64_t index;  // global block index
    size_t offset;   // of its values in local order
    size_t length;   // values (the state follows them in `data`)
    mutable std::mutex mu;
    std::vector<float> data;
    // The block's elements with their own learning rate (TableConfig.rate_scales); empty for most.
    std::vector<detail::RateSpan> rate_spans;
    bool rate_above_1 = false;  // a span scales the rule's change up
    // The bound UpdateRule::UpdateMeasured returned for the block's last update when nothing has
    // changed it since, so that the next push's proof of range need not scan it; kUnknownBound
    // otherwise (a new, loaded or initialised block, deltas, a rate span or the guard's work).
    uint32_t bound = UpdateRule::kUnknownBound;
    // The largest detail::MagnitudeBits of the state (data after `length`) when nothing has
    // changed it since it was measured, for a delta push's proof of range (deltas leave the
    // state alone); kUnknownStateMax otherwise (a new or loaded block, or after an update by the
    // rule or the overflow guard).
    static constexpr uint32_t kUnknownStateMax = UINT32_MAX;
    uint32_t state_max = kUnknownStateMax;
    // The largest detail::MagnitudeBits of the values (data before `length`) as the last delta
    // push's add left them, when nothing has changed them since, so that the next delta push
    // (GEO pushes one every few steps) need not scan them; kUnknownValueMax otherwise (a new,
    // loaded or initialised block, or after an update by the rule or the overflow guard).
    static constexpr uint32_t kUnknownValueMax = UINT32_MAX;  // as DeltaStaysWithin reads it
    uint32_t value_max = kUnknownValueMax;
  };

  DenseTable(const proto::TableConfig& config, std::unique_ptr<UpdateRule> rule);
  std::string Name() const;
  // Push, copying each block's values to every span of `outs` after its update, with the
  // blocks' checks and updates (and copies) run through `for_each` (one task per block).
  absl::Status PushBlocks(absl::Span<const float> grads, bool is_delta,
                          absl::Span<const absl::Span<float>> outs, const ForEach& for_each);
  // InvalidArgument naming `what` unless `out` is local_size floats.
  absl::Status CheckOut(absl::Span<const float> out, const char* what) const;
  // One block's part of PushBlocks (`g` and `out` start at the block's offset; `out` may be
  // null; `g_max` is the largest detail::MagnitudeBits of the block's gradients). False when the
  // update would take the block out of range and the guard put it back.
  bool UpdateBlock(Block& block, const float* g, uint32_t g_max, bool is_delta, float* out) const;
  absl::Status ReadPart(TableFileReader* part, std::vector<bool>* seen, uint64_t* loaded);

  proto::TableConfig config_;
  std::unique_ptr<UpdateRule> rule_;
  DenseLayout layout_;
  size_t local_size_ = 0;
  std::atomic<bool> pristine_{true};            // see Initialize
  std::vector<std::unique_ptr<Block>> blocks_;  // increasing index
  std::vector<int64_t> local_of_;               // global block -> position in blocks_, or -1
};

}  // namespace fleet::ps
