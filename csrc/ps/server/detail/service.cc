#include "ps/server/detail/service.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/support/method_handler.h>
#include <grpcpp/support/sync_stream.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "ps/detail/call_metadata.h"
#include "ps/detail/slice_field.h"
#include "ps/server/detail/payload.h"
#include "ps/server/detail/shm_segments.h"

namespace fleet::ps::detail {
namespace {

void SetStatus(proto::RpcStatus* out, const absl::Status& status) {
  out->set_code(static_cast<int32_t>(status.code()));
  out->set_message(std::string(status.message()));
}

// Resizes `bytes` to `floats` floats and returns them as a writable span.
absl::Span<float> FloatBuffer(std::string* bytes, size_t floats) {
  bytes->resize(floats * sizeof(float));
  return absl::Span<float>(reinterpret_cast<float*>(bytes->data()), floats);
}

// Replies whose values travel in a slice of their own (see the constructor).
using PullSparseSliceReply =
    SliceFieldMessage<proto::PullSparseReply, proto::PullSparseReply::kValuesFieldNumber>;
using BarrierSliceReply =
    SliceFieldMessage<proto::BarrierReply, proto::BarrierReply::kValuesFieldNumber>;
using PullDenseSliceReply =
    SliceFieldMessage<proto::PullDenseReply, proto::PullDenseReply::kValuesFieldNumber>;
using PushDenseSliceReply =
    SliceFieldMessage<proto::PushReply, proto::PushReply::kValuesFieldNumber>;

// A reply's fields besides its values, room for its values, and dropping them, for either
// kind of reply.
template <class Reply>
Reply* HeaderOf(Reply* reply) {
  return reply;
}
template <class Proto, int kField>
Proto* HeaderOf(SliceFieldMessage<Proto, kField>* reply) {
  return &reply->header;
}
template <class Reply>
absl::Span<float> ValuesOf(Reply* reply, size_t floats) {
  return FloatBuffer(reply->mutable_values(), floats);
}
template <class Proto, int kField>
absl::Span<float> ValuesOf(SliceFieldMessage<Proto, kField>* reply, size_t floats) {
  // Uninitialised: the table writes every float.
  return absl::Span<float>(reinterpret_cast<float*>(reply->AllocatePayload(floats * sizeof(float))),
                           floats);
}
template <class Reply>
void ClearValues(Reply* reply) {
  reply->clear_values();
}
template <class Proto, int kField>
void ClearValues(SliceFieldMessage<Proto, kField>* reply) {
  reply->payload = grpc::Slice();
}

// Range `range` of a worker's shared-memory segment as `floats` floats (a dense call of a worker
// on this host); InvalidArgument naming `what`, the range and the segment otherwise.
absl::StatusOr<absl::Span<float>> SegmentFloats(const ShmSegment& segment,
                                                const proto::ShmRange& range, size_t floats,
                                                const char* what) {
  auto span = segment.Floats(range.offset(), range.length(), what);
  if (!span.ok() || span->size() == floats) return span;
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": bytes [", range.offset(), ", +", range.length(), ") of ", segment.Describe(),
      " hold ", span->size(), " floats, the table ", floats, " on this server"));
}

// Range `range` of a worker's shared-memory segment as keys (a sparse call of a worker on this
// host); InvalidArgument naming `what`, the range and the segment when it is not inside the
// segment or not aligned to whole keys.
absl::StatusOr<absl::Span<const int64_t>> SegmentKeys(const ShmSegment& segment,
                                                      const proto::ShmRange& range,
                                                      const char* what) {
  auto span = segment.Floats(range.offset(), range.length(), what);
  if (!span.ok()) return span.status();
  if (range.offset() % alignof(int64_t) != 0 || range.length() % sizeof(int64_t) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": bytes [", range.offset(), ", +",
                                                   range.length(), ") of ", segment.Describe(),
                                                   " are not whole, aligned int64 keys"));
  }
  return absl::Span<const int64_t>(reinterpret_cast<const int64_t*>(span->data()),
                                   range.length() / sizeof(int64_t));
}

// Runs a handler's body. A table that grows past the memory the process may have throws
// std::bad_alloc (rows, index or slab); here that becomes this call's RESOURCE_EXHAUSTED
// instead of an exception that would end the server. The table is left consistent (a store
// allocates before it changes anything), but a push may have updated some of its rows.
template <class Fn>
auto Guarded(const char* rpc, Fn&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return decltype(body())(absl::ResourceExhaustedError(absl::StrCat(
        rpc,
        ": the server ran out of memory (its tables hold as many rows as the process may "
        "have: add servers, shrink the tables or raise the memory limit); a push may have "
        "applied part of its rows")));
  }
}

}  // namespace

PsServiceImpl::PsServiceImpl(TableSet* tables, BarrierSet* barriers, std::function<void()> on_stop,
                             std::string job_id, std::string incarnation, std::string loaded_from,
                             size_t round_threads)
    : tables_(tables),
      barriers_(barriers),
      accumulator_(tables, round_threads),
      on_stop_(std::move(on_stop)),
      job_id_(std::move(job_id)),
      incarnation_(std::move(incarnation)),
      loaded_from_(std::move(loaded_from)),
      started_(absl::Now()) {
  // Over gRPC the values of a pull, push-pull or sync step's reply are written once, by the
  // table, into a slice sent as the reply's `values` field, where a reply message took three
  // passes: zero-filling its string, the table's copy into it and protobuf's copy into gRPC's
  // slices. The bytes on the wire are the same message. A streamed unary method is served by
  // the same synchronous threads, with a reply type of its own.
  ServeValuesInSlice("PullSparse", &PsServiceImpl::ServePullSparse<PullSparseSliceReply>);
  ServeValuesInSlice("PullDense", &PsServiceImpl::ServePullDense<PullDenseSliceReply>);
  ServeValuesInSlice("PushDense", &PsServiceImpl::ServePushDense<PushDenseSliceReply>);
  ServeValuesInSlice("Barrier", &PsServiceImpl::ServeBarrier<BarrierSliceReply>);
}

template <class Request, class Reply>
void PsServiceImpl::ServeValuesInSlice(const char* method,
                                       void (PsServiceImpl::*serve)(grpc::ServerContext*,
                                                                    const Request&, Reply*)) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          proto::PsService::service_full_name());
  const int index = service->FindMethodByName(method)->index();
  using Stream = grpc::ServerUnaryStreamer<Request, Reply>;
  MarkMethodStreamed(
      index, new grpc::internal::StreamedUnaryHandler<Request, Reply>(
                 [this, serve, method](grpc::ServerContext* context, Stream* stream) {
                   Request request;
                   if (!stream->Read(&request)) {
                     return grpc::Status(grpc::StatusCode::INTERNAL,
                                         absl::StrCat(method, ": no request that parses as ",
                                                      Request::descriptor()->full_name()));
                   }
                   Reply reply;
                   (this->*serve)(context, request, &reply);
                   // Not WriteLast, which sends the reply with the status, after this returns
                   // and `reply` is gone.
                   stream->Write(reply);
                   return grpc::Status::OK;
                 }));
}

bool PsServiceImpl::Admit(grpc::ServerContext* context, proto::RpcStatus* status) const {
  if (context == nullptr) return true;  // called in process, not over gRPC
  context->AddInitialMetadata(kIncarnationKey, incarnation_);
  if (!loaded_from_.empty()) context->AddInitialMetadata(kLoadedFromKey, loaded_from_);
  if (job_id_.empty()) return true;
  const auto& metadata = context->client_metadata();
  auto it = metadata.find(kJobIdKey);
  if (it == metadata.end() || it->second.empty()) return true;
  const std::string theirs(it->second.data(), it->second.size());
  if (theirs == job_id_) return true;
  SetStatus(status, absl::FailedPreconditionError(absl::StrCat(
                        "this server belongs to job '", job_id_, "', the caller to job '", theirs,
                        "' (two jobs were given the same server ports?): refused, nothing of "
                        "the call reached a table or a barrier")));
  return false;
}

void PsServiceImpl::WorkerNews(grpc::ServerContext* context, const proto::BarrierRequest& request) {
  const uint32_t worker = request.worker_id();
  if (!request.failure().empty()) barriers_->Fail(worker, request.failure());
  if (request.goodbye()) barriers_->Leave(worker);
  if (!request.presence() || context == nullptr) return;
  barriers_->Attended(worker, context->peer());
  // Held while the worker lives (one server thread). IsCancelled turns true when the client
  // cancels the call (it says goodbye first) or its connection drops.
  while (!context->IsCancelled()) {
    if (barriers_->WaitForClose(absl::Milliseconds(200))) return;
  }
  barriers_->Dropped(worker, context->peer());
}

grpc::Status PsServiceImpl::PullSparse(grpc::ServerContext* context,
                                       const proto::PullSparseRequest* request,
                                       proto::PullSparseReply* reply) {
  ServePullSparse(context, *request, reply);
  return grpc::Status::OK;
}

template <class Reply>
void PsServiceImpl::ServePullSparse(grpc::ServerContext* context,
                                    const proto::PullSparseRequest& request, Reply* reply) {
  auto* header = HeaderOf(reply);
  ServedRpc metered(
      &meter_, RpcKind::kPullSparse, request, [reply] { return reply->ByteSizeLong(); },
      *header->mutable_status());
  if (!Admit(context, header->mutable_status())) return;
  header->set_table_id(request.table_id());
  absl::Status status = Guarded("PullSparse", [&]() -> absl::Status {
    auto table = tables_->Sparse(request.table_id());
    if (!table.ok()) return table.status();
    if (request.shm_segment() == 0) {
      auto keys = BytesAs<int64_t>(request.keys(), "keys");
      if (!keys.ok()) return keys.status();
      return (*table)->Pull(*keys, ValuesOf(reply, keys->size() * (*table)->dim()));
    }
    // A worker on this host: the keys are in its shared-memory segment (held for the call) and
    // the rows go there too, not into the reply.
    auto segment = shm_segments_.Get(request.shm_segment(), "PullSparse");
    if (!segment.ok()) return segment.status();
    auto keys = SegmentKeys(**segment, request.shm_keys(), "PullSparse shm_keys");
    if (!keys.ok()) return keys.status();
    auto out = SegmentFloats(**segment, request.shm_values(), keys->size() * (*table)->dim(),
                             "PullSparse shm_values");
    if (!out.ok()) return out.status();
    return (*table)->Pull(*keys, *out);
  });
  if (!status.ok()) ClearValues(reply);
  SetStatus(header->mutable_status(), status);
}

grpc::Status PsServiceImpl::PushSparse(grpc::ServerContext* context,
                                       const proto::PushSparseRequest* request,
                                       proto::PushReply* reply) {
  ServedRpc metered(&meter_, RpcKind::kPushSparse, *request, *reply, *reply->mutable_status());
  const CountedPush counted(request->accumulate() ? &accumulator_ : nullptr);
  if (!Admit(context, reply->mutable_status())) return grpc::Status::OK;
  reply->set_table_id(request->table_id());
  absl::Status status = Guarded("PushSparse", [&]() -> absl::Status {
    auto table = tables_->Sparse(request->table_id());
    if (!table.ok()) return table.status();
    // A worker on this host sends its keys and gradients in its shared-memory segment (held for
    // the call); otherwise both are on the wire.
    std::shared_ptr<const ShmSegment> segment;
    absl::StatusOr<absl::Span<const int64_t>> keys;
    absl::StatusOr<absl::Span<const float>> grads;
    if (request->shm_segment() == 0) {
      keys = BytesAs<int64_t>(request->keys(), "keys");
      if (!keys.ok()) return keys.status();
      grads = BytesAs<float>(request->grads(), "grads");
    } else {
      auto held = shm_segments_.Get(request->shm_segment(), "PushSparse");
      if (!held.ok()) return held.status();
      segment = *std::move(held);
      keys = SegmentKeys(*segment, request->shm_keys(), "PushSparse shm_keys");
      if (!keys.ok()) return keys.status();
      grads = SegmentFloats(*segment, request->shm_grads(), keys->size() * (*table)->dim(),
                            "PushSparse shm_grads");
    }
    if (!grads.ok()) return grads.status();
    if (request->return_values()) {
      if (request->accumulate()) {
        return absl::InvalidArgumentError(
            "PushSparse: return_values with accumulate (the sums wait for the step's barrier, "
            "so there are no values after this push to return)");
      }
      // The values after the push go where a pull's would: the segment or the reply.
      absl::StatusOr<absl::Span<float>> values =
          segment != nullptr
              ? SegmentFloats(*segment, request->shm_values(), keys->size() * (*table)->dim(),
                              "PushSparse shm_values")
              : FloatBuffer(reply->mutable_values(), keys->size() * (*table)->dim());
      if (!values.ok()) return values.status();
      return (*table)->PushAndPull(*keys, *grads, request->is_delta(), *values);
    }
    if (request->accumulate()) return accumulator_.AddSparse(request->table_id(), *keys, *grads);
    return (*table)->Push(*keys, *grads, request->is_delta());
  });
  if (!status.ok()) reply->clear_values();
  SetStatus(reply->mutable_status(), status);
  return grpc::Status::OK;
}

grpc::Status PsServiceImpl::PullDense(grpc::ServerContext* context,
                                      const proto::PullDenseRequest* request,
                                      proto::PullDenseReply* reply) {
  ServePullDense(context, *request, reply);
  return grpc::Status::OK;
}

template <class Reply>
void PsServiceImpl::ServePullDense(grpc::ServerContext* context,
                                   const proto::PullDenseRequest& request, Reply* reply) {
  auto* header = HeaderOf(reply);
  ServedRpc metered(
      &meter_, RpcKind::kPullDense, request, [reply] { return reply->ByteSizeLong(); },
      *header->mutable_status());
  if (!Admit(context, header->mutable_status())) return;
  header->set_table_id(request.table_id());
  absl::Status status = Guarded("PullDense", [&]() -> absl::Status {
    auto table = tables_->Dense(request.table_id());
    if (!table.ok()) return table.status();
    if (request.shm_segment() == 0) return (*table)->Pull(ValuesOf(reply, (*table)->local_size()));
    // A worker on this host: the values go into its shared-memory segment, not the reply.
    auto segment = shm_segments_.Get(request.shm_segment(), "PullDense");
    if (!segment.ok()) return segment.status();
    auto out = SegmentFloats(**segment, request.shm_values(), (*table)->local_size(),
                             "PullDense shm_values");
    if (!out.ok()) return out.status();
    return (*table)->Pull(*out);
  });
  if (!status.ok()) ClearValues(reply);
  SetStatus(header->mutable_status(), status);
}

grpc::Status PsServiceImpl::PushDense(grpc::ServerContext* context,
                                      const proto::PushDenseRequest* request,
                                      proto::PushReply* reply) {
  ServePushDense(context, *request, reply);
  return grpc::Status::OK;
}

template <class Reply>
void PsServiceImpl::ServePushDense(grpc::ServerContext* context,
                                   const proto::PushDenseRequest& request, Reply* reply) {
  auto* header = HeaderOf(reply);
  ServedRpc metered(
      &meter_, RpcKind::kPushDense, request, [reply] { return reply->ByteSizeLong(); },
      *header->mutable_status());
  const CountedPush counted(request.accumulate() ? &accumulator_ : nullptr);
  if (!Admit(context, header->mutable_status())) return;
  header->set_table_id(request.table_id());
  absl::Status status = Guarded("PushDense", [&]() -> absl::Status {
    auto table = tables_->Dense(request.table_id());
    if (!table.ok()) return table.status();
    // A worker on this host sends its gradients in its shared-memory segment (held for the call)
    // and takes the values there too; otherwise both are on the wire.
    std::shared_ptr<const ShmSegment> segment;
    absl::StatusOr<absl::Span<const float>> grads;
    if (request.shm_segment() == 0) {
      grads = BytesAs<float>(request.grads(), "grads");
    } else {
      auto held = shm_segments_.Get(request.shm_segment(), "PushDense");
      if (!held.ok()) return held.status();
      segment = *std::move(held);
      grads = SegmentFloats(*segment, request.shm_grads(), (*table)->local_size(),
                            "PushDense shm_grads");
    }
    if (!grads.ok()) return grads.status();
    // Values come back after an update or after GEO's deltas, never with a set or a sum.
    if (request.return_values() && (request.initialize() || request.accumulate())) {
      return absl::InvalidArgumentError(
          "return_values is for a push of gradients or deltas, not with initialize or accumulate");
    }
    if (request.initialize()) return (*table)->Initialize(*grads).status();
    if (request.accumulate()) return accumulator_.AddDense(request.table_id(), *grads);
    if (!request.return_values()) return (*table)->Push(*grads, request.is_delta());
    // One pass over the table: each block's values go into the reply right after its update.
    if (segment == nullptr) {
      return (*table)->PushAndPull(*grads, ValuesOf(reply, (*table)->local_size()),
                                   request.is_delta());
    }
    auto out = SegmentFloats(*segment, request.shm_values(), (*table)->local_size(),
                             "PushDense shm_values");
    if (!out.ok()) return out.status();
    return (*table)->PushAndPull(*grads, *out, request.is_delta());
  });
  if (!status.ok()) ClearValues(reply);
  SetStatus(header->mutable_status(), status);
}

grpc::Status PsServiceImpl::Barrier(grpc::ServerContext* context,
                                    const proto::BarrierRequest* request,
                                    proto::BarrierReply* reply) {
  ServeBarrier(context, *request, reply);
  return grpc::Status::OK;
}

template <class Reply>
void PsServiceImpl::ServeBarrier(grpc::ServerContext* context, const proto::BarrierRequest& request,
                                 Reply* reply) {
  auto* header = HeaderOf(reply);
  if (!Admit(context, header->mutable_status())) return;
  if (!request.failure().empty() || request.presence() || request.goodbye()) {
    WorkerNews(context, request);
    SetStatus(header->mutable_status(), absl::OkStatus());
    return;
  }
  const absl::Duration timeout = absl::Milliseconds(request.timeout_ms());
  if (!request.apply_accumulated()) {
    SetStatus(header->mutable_status(), barriers_->Arrive(request.name(), request.num_workers(),
                                                          request.worker_id(), timeout));
    return;
  }
  // The step's pushes may still be on their way (sent beside this request): arrive once they
  // are in (waiting at most the barrier's timeout for them too; they are normally in within
  // microseconds, so the barrier keeps its whole timeout and the message that names it).
  if (request.accumulate_pushes() > 0) {
    absl::Status landed =
        accumulator_.AwaitPushes(request.accumulate_pushes(), absl::Now() + timeout);
    if (!landed.ok()) {
      SetStatus(header->mutable_status(), landed);
      return;
    }
  }
  // Where this worker's dense values go: the round writes them there right after each block's
  // update, while the block is in cache and on the round's threads, instead of every released
  // worker copying the whole table after the round. A bad destination is still this call's
  // error after the round (the arrival counts), as when the values were pulled after it.
  absl::Status destination = absl::OkStatus();
  std::shared_ptr<const ShmSegment> segment;  // held until the reply
  bool written = false;
  StepOutput output;
  if (request.pull_dense()) {
    destination = Guarded("Barrier", [&]() -> absl::Status {
      auto table = tables_->Dense(request.pull_dense_table());
      if (!table.ok()) return table.status();
      absl::StatusOr<absl::Span<float>> values;
      if (request.shm_segment() == 0) {
        values = ValuesOf(reply, (*table)->local_size());
      } else {
        // A worker on this host: the values go into its shared-memory segment, not the reply.
        auto held = shm_segments_.Get(request.shm_segment(), "Barrier");
        if (!held.ok()) return held.status();
        segment = *std::move(held);
        values = SegmentFloats(*segment, request.shm_values(), (*table)->local_size(),
                               "Barrier shm_values");
      }
      if (!values.ok()) return values.status();
      output = StepOutput{request.pull_dense_table(), *values, &written};
      return absl::OkStatus();
    });
  }
  const uint32_t num_workers = request.num_workers();
  uint32_t done_workers = 0;
  absl::Status status = barriers_->ArriveAndRun(
      request.name(), num_workers, request.worker_id(), timeout, request.done(),
      [this, num_workers](uint32_t /*done*/, absl::Span<const StepOutput> outputs) {
        accumulator_.ResetPushCounts();
        // A finished worker counts as a zero gradient: the step averages over every worker, so
        // a worker still training after the others ended its data moves the parameters as far
        // per sample as before, as Paddle's pserver does (it scales by 1 / trainers). Averaging
        // over the workers still training made those last steps twice as large per sample in a
        // 2-worker job: word2vec's held-out AUC fell by 0.002-0.014 with the length of that
        // tail (models/README.md, "word2vec's sync").
        // A table out of memory fails the round for every arrival instead of ending the server.
        return Guarded("Barrier", [&] {
          return accumulator_.ApplyAll(1.0f / static_cast<float>(num_workers), outputs);
        });
      },
      &done_workers, output);
  header->set_done_workers(done_workers);
  if (status.ok() && request.pull_dense()) {
    status = destination;
    // Let through without a round (a restarted worker's first barrier): the values as they are.
    // The table cannot change before this worker's next arrival: the others' next pushes only
    // accumulate until that round's update.
    if (status.ok() && !written) {
      status = Guarded("Barrier", [&]() -> absl::Status {
        auto table = tables_->Dense(request.pull_dense_table());
        if (!table.ok()) return table.status();
        return (*table)->Pull(output.values);
      });
    }
  }
  if (!status.ok() && request.pull_dense()) ClearValues(reply);
  SetStatus(header->mutable_status(), status);
}

grpc::Status PsServiceImpl::Save(grpc::ServerContext* context, const proto::SaveRequest* request,
                                 proto::SaveLoadReply* reply) {
  if (!Admit(context, reply->mutable_status())) return grpc::Status::OK;
  reply->set_table_id(request->table_id());
  auto files = Guarded("Save", [&] {
    return tables_->Save(request->dirname(), request->all_tables(), request->table_id(),
                         request->mode(), request->save_id(), !request->keep_cycle());
  });
  if (files.ok()) {
    uint64_t rows = 0;
    for (auto& file : *files) {
      rows += file.rows();
      *reply->add_files() = std::move(file);
    }
    reply->set_rows(rows);
  }
  SetStatus(reply->mutable_status(), files.status());
  return grpc::Status::OK;
}

grpc::Status PsServiceImpl::CommitSave(grpc::ServerContext* context,
                                       const proto::CommitSaveRequest* request,
                                       proto::CommitSaveReply* reply) {
  if (!Admit(context, reply->mutable_status())) return grpc::Status::OK;
  SetStatus(reply->mutable_status(), tables_->CommitSave(*request));
  return grpc::Status::OK;
}

grpc::Status PsServiceImpl::Load(grpc::ServerContext* context, const proto::LoadRequest* request,
                                 proto::SaveLoadReply* reply) {
  if (!Admit(context, reply->mutable_status())) return grpc::Status::OK;
  reply->set_table_id(request->table_id());
  auto rows = Guarded("Load", [&] {
    return tables_->Load(request->dirname(), request->all_tables(), request->table_id());
  });
  if (rows.ok()) reply->set_rows(*rows);
  SetStatus(reply->mutable_status(), rows.status());
  return grpc::Status::OK;
}

grpc::Status PsServiceImpl::Shrink(grpc::ServerContext* context,
                                   const proto::ShrinkRequest* request, proto::ShrinkReply* reply) {
  if (!Admit(context, reply->mutable_status())) return grpc::Status::OK;
  reply->set_table_id(request->table_id());
  auto removed = Guarded(
      "Shrink", [&] { return tables_->Shrink(request->table_id(), request->max_unseen_saves()); });
  if (removed.ok()) reply->set_rows_removed(*removed);
  SetStatus(reply->mutable_status(), removed.status());
  return grpc::Status::OK;
}

grpc::Status PsServiceImpl::Stats(grpc::ServerContext* context, const proto::StatsRequest*,
                                  proto::StatsReply* reply) {
  if (!Admit(context, reply->mutable_status())) return grpc::Status::OK;
  for (auto& stats : tables_->Stats()) *reply->add_tables() = std::move(stats);
  SetStatus(reply->mutable_status(), absl::OkStatus());
  return grpc::Status::OK;
}

grpc::Status PsServiceImpl::Heartbeat(grpc::ServerContext* context, const proto::HeartbeatRequest*,
                                      proto::HeartbeatReply* reply) {
  if (!Admit(context, reply->mutable_status())) return grpc::Status::OK;
  *reply->mutable_config() = tables_->config();
  reply->set_uptime_ms(absl::ToInt64Milliseconds(absl::Now() - started_));
  SetStatus(reply->mutable_status(), absl::OkStatus());
  return grpc::Status::OK;
}

grpc::Status PsServiceImpl::AttachSegment(grpc::ServerContext* context,
                                          const proto::AttachSegmentRequest* request,
                                          proto::AttachSegmentReply* reply) {
  if (!Admit(context, reply->mutable_status())) return grpc::Status::OK;
  if (request->detach() != 0) {
    SetStatus(reply->mutable_status(), shm_segments_.Detach(request->detach()));
    return grpc::Status::OK;
  }
  auto id = shm_segments_.Attach(*request);
  if (id.ok()) reply->set_segment_id(*id);
  SetStatus(reply->mutable_status(), id.status());
  return grpc::Status::OK;
}

grpc::Status PsServiceImpl::Stop(grpc::ServerContext* context, const proto::StopRequest*,
                                 proto::StopReply* reply) {
  if (!Admit(context, reply->mutable_status())) return grpc::Status::OK;
  if (context != nullptr) {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find(kJobIdKey);
    const std::string caller_job =
        it == metadata.end() ? "" : std::string(it->second.data(), it->second.size());
    // Admit lets a caller without a job id read and write (tools, tests), but stopping ends
    // the job for everyone: only the job's own clients, which always send its id, may.
    if (!job_id_.empty() && caller_job.empty()) {
      SetStatus(reply->mutable_status(),
                absl::FailedPreconditionError(absl::StrCat(
                    "Stop from ", context->peer(), " refused: this server belongs to job '",
                    job_id_, "' and the caller named no job (a client of the job stops it)")));
      return grpc::Status::OK;
    }
    // A server that exits 0 looks to its launcher like one its job ended: say who stopped it.
    std::fprintf(stderr, "parameter server: Stop RPC from %s (job '%s'): stopping\n",
                 context->peer().c_str(), caller_job.c_str());
  }
  on_stop_();
  SetStatus(reply->mutable_status(), absl::OkStatus());
  return grpc::Status::OK;
}

}  // namespace fleet::ps::detail
