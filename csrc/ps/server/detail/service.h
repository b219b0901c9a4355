#pragma once
// The gRPC face of a server: decodes payload bytes, calls the tables, and reports the outcome
// in each reply's RpcStatus (the gRPC status stays OK unless the transport fails).

#include <functional>

#include "absl/time/time.h"
#include "fleet/ps/ps.grpc.pb.h"
#include "ps/rpc_meter.h"
#include "ps/server/detail/barrier.h"
#include "ps/server/detail/grad_accumulator.h"
#include "ps/server/detail/shm_segments.h"
#include "ps/server/detail/table_set.h"

namespace fleet::ps::detail {

class PsServiceImpl final : public proto::PsService::Service {
 public:
  // `on_stop` runs on a Stop RPC (it must not block on the RPCs in flight). `job_id`: the job
  // whose calls are served (empty: any); `incarnation`: this server's start, sent with every
  // reply, and `loaded_from`, the checkpoint it loaded at start (empty: none), with every reply
  // when set (call_metadata.h). `round_threads`: the threads applying a sync round
  // (GradAccumulator). Handlers may be called without a gRPC context (nullptr: tests and
  // fuzzers call them directly): such a call has no metadata and no connection to watch.
  PsServiceImpl(TableSet* tables, BarrierSet* barriers, std::function<void()> on_stop,
                std::string job_id = "", std::string incarnation = "", std::string loaded_from = "",
                size_t round_threads = 1);

  grpc::Status PullSparse(grpc::ServerContext*, const proto::PullSparseRequest* request,
                          proto::PullSparseReply* reply) override;
  grpc::Status PushSparse(grpc::ServerContext*, const proto::PushSparseRequest* request,
                          proto::PushReply* reply) override;
  grpc::Status PullDense(grpc::ServerContext*, const proto::PullDenseRequest* request,
                         proto::PullDenseReply* reply) override;
  grpc::Status PushDense(grpc::ServerContext*, const proto::PushDenseRequest* request,
                         proto::PushReply* reply) override;
  grpc::Status Barrier(grpc::ServerContext*, const proto::BarrierRequest* request,
                       proto::BarrierReply* reply) override;
  grpc::Status Save(grpc::ServerContext*, const proto::SaveRequest* request,
                    proto::SaveLoadReply* reply) override;
  grpc::Status CommitSave(grpc::ServerContext*, const proto::CommitSaveRequest* request,
                          proto::CommitSaveReply* reply) override;
  grpc::Status Load(grpc::ServerContext*, const proto::LoadRequest* request,
                    proto::SaveLoadReply* reply) override;
  grpc::Status Shrink(grpc::ServerContext*, const proto::ShrinkRequest* request,
                      proto::ShrinkReply* reply) override;
  grpc::Status Stats(grpc::ServerContext*, const proto::StatsRequest* request,
                     proto::StatsReply* reply) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const proto::HeartbeatRequest* request,
                         proto::HeartbeatReply* reply) override;
  grpc::Status Stop(grpc::ServerContext*, const proto::StopRequest* request,
                    proto::StopReply* reply) override;
  // Maps (or with `detach`, drops) a shared-memory segment of a worker on this host.
  grpc::Status AttachSegment(grpc::ServerContext*, const proto::AttachSegmentRequest* request,
                             proto::AttachSegmentReply* reply) override;

  // The data path's RPCs served so far (pulls and pushes), for live metrics.
  const RpcMeter& meter() const { return meter_; }

 private:
  // The bodies of the calls whose replies carry values (PullSparse, PullDense, PushDense,
  // Barrier), for a reply message (a call in process) or a reply whose values travel in a slice
  // of their own (a call over gRPC, see the constructor).
  template <class Reply>
  void ServePullSparse(grpc::ServerContext* context, const proto::PullSparseRequest& request,
                       Reply* reply);
  template <class Reply>
  void ServeBarrier(grpc::ServerContext* context, const proto::BarrierRequest& request,
                    Reply* reply);
  template <class Reply>
  void ServePullDense(grpc::ServerContext* context, const proto::PullDenseRequest& request,
                      Reply* reply);
  template <class Reply>
  void ServePushDense(grpc::ServerContext* context, const proto::PushDenseRequest& request,
                      Reply* reply);
  // Serves `Method` over gRPC with its reply's values written once, straight into a gRPC slice.
  template <class Request, class Reply>
  void ServeValuesInSlice(const char* method, void (PsServiceImpl::*serve)(grpc::ServerContext*,
                                                                           const Request&, Reply*));

  // Every handler starts here: stamps the reply with the incarnation and refuses (false, the
  // reason in `status`) a caller of another job.
  bool Admit(grpc::ServerContext* context, proto::RpcStatus* status) const;
  // A worker's failure, presence or goodbye (BarrierRequest), rather than a barrier.
  void WorkerNews(grpc::ServerContext* context, const proto::BarrierRequest& request);

  TableSet* tables_;
  BarrierSet* barriers_;
  GradAccumulator accumulator_;  // sync training's pending gradients
  std::function<void()> on_stop_;
  std::string job_id_;
  std::string incarnation_;
  std::string loaded_from_;
  absl::Time started_;
  RpcMeter meter_;
  ShmSegments shm_segments_;  // of workers on this host (AttachSegment)
};

}  // namespace fleet::ps::detail
