#pragma once
// For the C++ tests of the shared-memory transport that talk to a server's raw service: attaching
// a segment as a client does, so that a test can then send requests naming any range of it.

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include "fleet/ps/ps.grpc.pb.h"
#include "ps/detail/shm_segment.h"

namespace fleet::ps::testing_shm {

// Registers `segment` of this process with the server behind `stub`. `reply` gets the segment's id
// or the server's refusal; the return value is the call's transport status.
inline grpc::Status AttachRaw(proto::PsService::Stub* stub, const detail::ShmSegment& segment,
                              proto::AttachSegmentReply* reply) {
  proto::AttachSegmentRequest attach;
  attach.set_pid(getpid());
  attach.set_fd(segment.fd());
  attach.set_token(segment.token());
  attach.set_size(segment.size());
  grpc::ClientContext context;
  return stub->AttachSegment(&context, attach, reply);
}

}  // namespace fleet::ps::testing_shm
