// PsClient's sparse calls: a pull and a push of rows by key, split by server into requests of at
// most max_keys_per_request keys, each on the wire or through the memory shared with a server on
// this host.

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ps/client/client.h"
#include "ps/client/detail/client_call.h"
#include "ps/client/detail/dense_wire.h"
#include "ps/client/detail/key_dedup.h"
#include "ps/client/detail/shm_slots.h"

namespace fleet::ps {
namespace {

// A sparse pull's rows stay in the received slices and are copied once, to their callers'
// positions (the reply's values are a few hundred KB a step).
using PullSparseCall = detail::Call<
    proto::PullSparseRequest,
    detail::SliceFieldReply<proto::PullSparseReply, proto::PullSparseReply::kValuesFieldNumber>>;
// A sparse push's gradients are written once, straight into the slice that is sent (a few
// hundred KB a step), not into the request's string and again by protobuf into gRPC's slices;
// a push-pull's rows stay in the received slices, as a pull's.
using PushSparseCall =
    detail::Call<detail::SliceFieldRequest<proto::PushSparseRequest,
                                           proto::PushSparseRequest::kGradsFieldNumber>,
                 detail::SliceFieldReply<proto::PushReply, proto::PushReply::kValuesFieldNumber>>;

// How many keys ahead the dedup table is prefetched (when it is large enough to need it).
constexpr uint32_t kDedupAhead = 64;

// Requests to each server, filled key by key in the caller's order and sent as soon as one
// holds max_keys keys, so that routing the remaining keys overlaps with the servers' work.
// `Pending` holds `call` and raw pointers into its payload, sized by `open(server)` for max_keys
// keys; `send(server, pending, count, positions)` trims the payload to `count` keys and launches
// it.
template <class Pending>
class RequestStream {
 public:
  using OpenFn = std::function<Pending(uint32_t)>;
  using SendFn = std::function<void(uint32_t, Pending&, size_t, std::vector<uint32_t>)>;

  RequestStream(size_t num_servers, size_t max_keys, OpenFn open, SendFn send)
      : max_keys_(max_keys), open_(std::move(open)), send_(std::move(send)), slots_(num_servers) {}
  ~RequestStream() {
    // Unsent after an error: the server never saw them, so their shared memory is free again.
    for (auto& slot : slots_) {
      delete slot.pending.call;
      if (slot.pending.lease != nullptr) slot.pending.lease->Release();
    }
  }

  // The request of `server` with room for one more key, and that key's index in it.
  Pending& Next(uint32_t server, size_t* index) {
    Slot& slot = slots_[server];
    if (slot.pending.call == nullptr) {
      slot.pending = open_(server);
      slot.positions.reserve(max_keys_);
    }
    *index = slot.positions.size();
    return slot.pending;
  }
  // The key at caller position `position` now fills that index; sends the request when full.
  void Commit(uint32_t server, uint32_t position) {
    Slot& slot = slots_[server];
    slot.positions.push_back(position);
    if (slot.positions.size() == max_keys_) Send(server);
  }
  // Sends the requests that are partly filled.
  void Flush() {
    for (uint32_t s = 0; s < slots_.size(); ++s) {
      if (slots_[s].pending.call != nullptr) Send(s);
    }
  }

 private:
  struct Slot {
    Pending pending;
    std::vector<uint32_t> positions;
  };
  void Send(uint32_t server) {
    Slot& slot = slots_[server];
    const size_t count = slot.positions.size();
    send_(server, slot.pending, count, std::move(slot.positions));
    slot = Slot();
  }

  size_t max_keys_;
  OpenFn open_;
  SendFn send_;
  std::vector<Slot> slots_;
};

// Copies the rows of a pull reply to their caller positions.
absl::Status ScatterRows(const detail::FieldBytes& values, absl::Span<const uint32_t> positions,
                         size_t dim, absl::Span<float> out) {
  if (values.size() != positions.size() * dim * sizeof(float)) {
    return absl::InternalError(absl::StrCat("reply holds ", values.size(), " bytes, expected ",
                                            positions.size() * dim * sizeof(float)));
  }
  values.CopyPieces(dim * sizeof(float),
                    [&](size_t j) { return out.data() + size_t{positions[j]} * dim; });
  return absl::OkStatus();
}

// The same from the rows as they lie in shared memory, in request order.
void ScatterRows(const char* rows, absl::Span<const uint32_t> positions, size_t dim,
                 absl::Span<float> out) {
  const size_t row_bytes = dim * sizeof(float);
  for (uint32_t position : positions) {
    std::memcpy(out.data() + size_t{position} * dim, rows, row_bytes);
    rows += row_bytes;
  }
}

// The gradients of keys that occur more than once in a push, summed under the first occurrence
// in position order (the first occurrence's gradient, plus each later one in turn).
//
// A CTR-DNN step repeats most of its keys (26 slots x 512 rows: about 2,800 distinct of 13,312),
// so the per-repeat work is the merge's cost: one array indexed by position says what each
// position is, where a hash map from first position to sum (one lookup per repeat and per
// distinct key) was about half of the send thread's push.
class MergedRepeats {
 public:
  // With `list_repeats`, also lists every repeat with its first position (repeats()), which a
  // push-pull needs to copy the rows it brings back; a push has no use for the list.
  MergedRepeats(absl::Span<const int64_t> keys, absl::Span<const float> grads, size_t dim,
                bool list_repeats, detail::KeyDedup* dedup)
      : grads_(grads), dim_(dim), list_repeats_(list_repeats) {
    dedup->Reset(keys);
    const bool prefetch = dedup->WorthPrefetching();
    for (uint32_t i = 0; i < keys.size(); ++i) {
      if (prefetch && i + kDedupAhead < keys.size()) dedup->Prefetch(i + kDedupAhead);
      const uint32_t head = dedup->FirstOccurrence(i);
      if (head != i) Add(i, head, keys.size());
    }
  }
  // True for every occurrence of a key but its first.
  bool IsRepeat(uint32_t i) const { return !role_.empty() && role_[i] == kRepeat; }
  // Every (position, its key's first position) of a repeat, in position order (empty unless
  // `list_repeats`).
  const std::vector<std::pair<uint32_t, uint32_t>>& repeats() const { return repeats_; }
  // The gradient to send for the key first occurring at position i.
  const float* Row(uint32_t i) const {
    if (!role_.empty() && role_[i] != kAlone) return sums_.data() + size_t{role_[i] - 1} * dim_;
    return grads_.data() + size_t{i} * dim_;
  }

 private:
  // role_[i]: kAlone for a first occurrence without repeats (its gradient is sent as it is),
  // kRepeat for a later occurrence, else 1 + the index of its key's summed row in sums_.
  static constexpr uint32_t kAlone = 0;
  static constexpr uint32_t kRepeat = UINT32_MAX;

  void Add(uint32_t i, uint32_t head, size_t n) {
    if (role_.empty()) role_.assign(n, kAlone);
    role_[i] = kRepeat;
    if (list_repeats_) repeats_.emplace_back(i, head);
    if (role_[head] == kAlone) {
      role_[head] = static_cast<uint32_t>(sums_.size() / dim_) + 1;
      const float* g = grads_.data() + size_t{head} * dim_;
      sums_.insert(sums_.end(), g, g + dim_);
    }
    float* __restrict sum = sums_.data() + size_t{role_[head] - 1} * dim_;
    const float* __restrict g = grads_.data() + size_t{i} * dim_;
    for (size_t k = 0; k < dim_; ++k) sum[k] += g[k];
  }

  absl::Span<const float> grads_;
  size_t dim_;
  bool list_repeats_;
  std::vector<uint32_t> role_;  // per position, once a repeat is seen
  std::vector<std::pair<uint32_t, uint32_t>> repeats_;
  std::vector<float> sums_;
};

// A slot of the memory shared with a server on this host (`slots`, null for a server on the
// wire) for one sparse request of up to `max_keys` keys: the keys at the start of the slot's
// grads half, a push's gradients (`floats_bytes`) right after them; a pull's rows go into the
// values half. Null, and the request goes on the wire, when no slot is free or it does not fit.
std::shared_ptr<detail::ShmSlots::Lease> SparseLease(const std::shared_ptr<detail::ShmSlots>& slots,
                                                     size_t max_keys, size_t push_bytes,
                                                     size_t pull_bytes) {
  if (slots == nullptr || max_keys * sizeof(int64_t) + push_bytes > slots->half() ||
      pull_bytes > slots->half()) {
    return nullptr;
  }
  return detail::ShmSlots::Acquire(slots);
}

// A sparse request being filled. With `lease` (a server on this host), keys and rows are
// written into a slot of the memory shared with the server (client_sparse_shm.h), else into the
// request.
struct PendingPull {
  PullSparseCall* call = nullptr;
  char* keys = nullptr;
  std::shared_ptr<detail::ShmSlots::Lease> lease;
};
// InvalidArgument unless the caller's `floats` floats are `keys` rows of `dim`, named as
// "<call> of table <id>: ... need N <noun>, got M".
absl::Status CheckRowFloats(absl::string_view call, uint32_t table_id, size_t keys, size_t dim,
                            size_t floats, absl::string_view noun) {
  if (floats == keys * dim) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(call, " of table ", table_id, ": ", keys,
                                                 " keys of dim ", dim, " need ", keys * dim, " ",
                                                 noun, ", got ", floats));
}

struct PendingPush {
  PushSparseCall* call = nullptr;
  char* keys = nullptr;
  char* grads = nullptr;
  std::shared_ptr<detail::ShmSlots::Lease> lease;
};

}  // namespace

Future PsClient::PullSparse(uint32_t table_id, absl::Span<const int64_t> keys,
                            absl::Span<float> out) {
  if (auto s = CheckUsable("PullSparse"); !s.ok()) return Future::Failed(s);
  auto dim_or = SparseDim(table_id);
  if (!dim_or.ok()) return Future::Failed(dim_or.status());
  const size_t dim = *dim_or;
  if (absl::Status fits =
          CheckRowFloats("PullSparse", table_id, keys.size(), dim, out.size(), "output floats");
      !fits.ok()) {
    return Future::Failed(std::move(fits));
  }
  // The initial count of 1 keeps the call open until every request is sent.
  auto state = std::make_shared<detail::CallState>(1);
  const std::string what = absl::StrCat("PullSparse of table ", table_id);
  const size_t max_keys = std::min(options_.max_keys_per_request, keys.size());
  RequestStream<PendingPull> stream(
      num_servers(), max_keys,
      [&](uint32_t s) {
        PendingPull p;
        p.call = new PullSparseCall;
        p.call->request.set_table_id(table_id);
        p.lease = SparseLease(shm_[s], max_keys, 0, max_keys * dim * sizeof(float));
        if (p.lease != nullptr) {
          p.keys = p.lease->grads();
        } else {
          p.call->request.mutable_keys()->resize(max_keys * sizeof(int64_t));
          p.keys = p.call->request.mutable_keys()->data();
        }
        return p;
      },
      [&](uint32_t s, PendingPull& p, size_t count, std::vector<uint32_t> positions) {
        proto::PullSparseRequest& request = p.call->request;
        if (p.lease == nullptr) {
          request.mutable_keys()->resize(count * sizeof(int64_t));
        } else {
          // The keys are in the slot and the server writes the rows into it; the request holds
          // only where.
          request.set_shm_segment(p.lease->segment_id());
          detail::SetShmRange(request.mutable_shm_keys(), p.lease->grads_offset(),
                              count * sizeof(int64_t));
          detail::SetShmRange(request.mutable_shm_values(), p.lease->values_offset(),
                              count * dim * sizeof(float));
        }
        state->AddPending(1);
        Launch(s, what, options_.rpc_timeout, p.call,
               detail::WireStarter<PullSparseCall>{transport_->channels[s].get(),
                                                   detail::PsMethod("PullSparse")},
               state,
               [out, dim, positions = std::move(positions),
                lease = std::move(p.lease)](const auto& reply) {
                 if (lease == nullptr) return ScatterRows(reply.values(), positions, dim, out);
                 ScatterRows(lease->values(), positions, dim, out);
                 lease->Release();
                 return absl::OkStatus();
               });
        p.call = nullptr;
      });
  std::unique_ptr<detail::KeyDedup> dedup = dedup_pool_->Acquire();
  dedup->Reset(keys);
  // One server (a job's usual local set-up) needs no call of the sharding function per key.
  const bool one_server = num_servers() == 1;
  std::vector<std::pair<uint32_t, uint32_t>> repeats;  // (caller position, first position)
  const bool prefetch = dedup->WorthPrefetching();
  for (uint32_t i = 0; i < keys.size(); ++i) {
    if (prefetch && i + kDedupAhead < keys.size()) dedup->Prefetch(i + kDedupAhead);
    const uint32_t head = dedup->FirstOccurrence(i);
    if (head != i) {
      repeats.emplace_back(i, head);
      continue;
    }
    const uint32_t s = one_server ? 0 : ServerOf(keys[i]);
    if (s >= num_servers()) return FailSharding(state);
    size_t index;
    PendingPull& p = stream.Next(s, &index);
    std::memcpy(p.keys + index * sizeof(int64_t), &keys[i], sizeof(int64_t));
    stream.Commit(s, i);
  }
  dedup_pool_->Release(std::move(dedup));
  stream.Flush();
  if (!repeats.empty()) {
    state->SetFinisher([out, dim, repeats = std::move(repeats)] {
      for (auto [pos, src] : repeats) {
        std::memcpy(out.data() + size_t{pos} * dim, out.data() + size_t{src} * dim,
                    dim * sizeof(float));
      }
    });
  }
  state->Done(absl::OkStatus());
  return Future(state);
}

Future PsClient::PushSparse(uint32_t table_id, absl::Span<const int64_t> keys,
                            absl::Span<const float> grads, PushKind kind) {
  return PushSparseAndMaybePull(table_id, keys, grads, kind, {}, false);
}

Future PsClient::PushPullSparse(uint32_t table_id, absl::Span<const int64_t> keys,
                                absl::Span<const float> grads, absl::Span<float> out,
                                PushKind kind) {
  if (kind != PushKind::kGradient && kind != PushKind::kDelta) {
    return Future::Failed(absl::InvalidArgumentError(absl::StrCat(
        "PushPullSparse of table ", table_id, " as ", detail::PushCallName(kind, "PushSparse"),
        ": only a push of gradients or deltas returns values")));
  }
  return PushSparseAndMaybePull(table_id, keys, grads, kind, out, true);
}

Future PsClient::PushSparseAndMaybePull(uint32_t table_id, absl::Span<const int64_t> keys,
                                        absl::Span<const float> grads, PushKind kind,
                                        absl::Span<float> out, bool pull) {
  const char* name = pull ? "PushPullSparse" : "PushSparse";
  if (auto s = CheckUsable(name); !s.ok()) return Future::Failed(s);
  if (kind == PushKind::kInitialize) {
    return Future::Failed(
        absl::InvalidArgumentError(absl::StrCat("PushSparse of table ", table_id,
                                                ": sparse rows are initialised by the "
                                                "table's initializer, not by an initialize push")));
  }
  const bool is_delta = kind == PushKind::kDelta;
  auto dim_or = SparseDim(table_id);
  if (!dim_or.ok()) return Future::Failed(dim_or.status());
  const size_t dim = *dim_or;
  const size_t row_bytes = dim * sizeof(float);
  if (absl::Status fits = CheckRowFloats(name, table_id, keys.size(), dim, grads.size(), "floats");
      !fits.ok()) {
    return Future::Failed(std::move(fits));
  }
  if (pull) {
    if (absl::Status fits =
            CheckRowFloats(name, table_id, keys.size(), dim, out.size(), "output floats");
        !fits.ok()) {
      return Future::Failed(std::move(fits));
    }
  }
  std::unique_ptr<detail::KeyDedup> dedup = dedup_pool_->Acquire();
  const MergedRepeats merged(keys, grads, dim, /*list_repeats=*/pull, dedup.get());
  dedup_pool_->Release(std::move(dedup));
  auto state = std::make_shared<detail::CallState>(1);
  const std::string what = absl::StrCat(
      pull ? "PushPullSparse" : detail::PushCallName(kind, "PushSparse"), " of table ", table_id);
  const size_t max_keys = std::min(options_.max_keys_per_request, keys.size());
  RequestStream<PendingPush> stream(
      num_servers(), max_keys,
      [&](uint32_t s) {
        PendingPush p;
        p.call = new PushSparseCall;
        proto::PushSparseRequest& header = p.call->request.header;
        header.set_table_id(table_id);
        header.set_is_delta(is_delta);
        header.set_accumulate(kind == PushKind::kAccumulate);
        header.set_return_values(pull);
        // A push-pull's rows come back into the slot's values half, as a pull's.
        p.lease =
            SparseLease(shm_[s], max_keys, max_keys * row_bytes, pull ? max_keys * row_bytes : 0);
        if (p.lease != nullptr) {
          p.keys = p.lease->grads();
          p.grads = p.keys + max_keys * sizeof(int64_t);
        } else {
          header.mutable_keys()->resize(max_keys * sizeof(int64_t));
          p.keys = header.mutable_keys()->data();
          p.grads = p.call->request.AllocatePayload(max_keys * row_bytes);
        }
        return p;
      },
      [&](uint32_t s, PendingPush& p, size_t count, std::vector<uint32_t> positions) {
        proto::PushSparseRequest& header = p.call->request.header;
        if (p.lease == nullptr) {
          header.mutable_keys()->resize(count * sizeof(int64_t));
          // The rows written so far (a slice of the same bytes: nothing is copied).
          p.call->request.payload = p.call->request.payload.sub(0, count * row_bytes);
        } else {
          header.set_shm_segment(p.lease->segment_id());
          detail::SetShmRange(header.mutable_shm_keys(), p.lease->grads_offset(),
                              count * sizeof(int64_t));
          detail::SetShmRange(header.mutable_shm_grads(),
                              p.lease->grads_offset() + max_keys * sizeof(int64_t),
                              count * row_bytes);
          if (pull) {
            detail::SetShmRange(header.mutable_shm_values(), p.lease->values_offset(),
                                count * row_bytes);
          }
        }
        if (kind == PushKind::kAccumulate) accumulate_sent_[s].fetch_add(1);
        state->AddPending(1);
        if (!pull) positions.clear();  // a push's reply carries no rows to place
        Launch(s, what, options_.rpc_timeout, p.call,
               detail::WireStarter<PushSparseCall>{transport_->channels[s].get(),
                                                   detail::PsMethod("PushSparse")},
               state,
               [pull, out, dim, positions = std::move(positions),
                lease = std::move(p.lease)](const auto& reply) {
                 absl::Status placed = absl::OkStatus();
                 if (lease == nullptr) {
                   if (pull) placed = ScatterRows(reply.values(), positions, dim, out);
                   return placed;
                 }
                 if (pull) ScatterRows(lease->values(), positions, dim, out);
                 lease->Release();
                 return placed;
               });
        p.call = nullptr;
      });
  const bool one_server = num_servers() == 1;  // as in PullSparse
  for (uint32_t i = 0; i < keys.size(); ++i) {
    if (merged.IsRepeat(i)) continue;
    const uint32_t s = one_server ? 0 : ServerOf(keys[i]);
    if (s >= num_servers()) return FailSharding(state);
    size_t index;
    PendingPush& p = stream.Next(s, &index);
    std::memcpy(p.keys + index * sizeof(int64_t), &keys[i], sizeof(int64_t));
    std::memcpy(p.grads + index * row_bytes, merged.Row(i), row_bytes);
    stream.Commit(s, i);
  }
  stream.Flush();
  if (pull && !merged.repeats().empty()) {
    // A repeated key's rows are its first occurrence's (the push summed its gradients there).
    state->SetFinisher([out, dim, repeats = merged.repeats()] {
      for (auto [pos, src] : repeats) {
        std::memcpy(out.data() + size_t{pos} * dim, out.data() + size_t{src} * dim,
                    dim * sizeof(float));
      }
    });
  }
  state->Done(absl::OkStatus());
  return Future(state);
}

}  // namespace fleet::ps
