#pragma once
// Dense values on the wire with one copy at each end of a call instead of protobuf's two.
//
// A dense push or pull carries a whole dense table every step (CTR-DNN: 1.7 MB). Through
// protobuf, a worker copied the gradients into the request's `bytes` field and gRPC copied the
// message again into its slices; on the way back gRPC's parse copied the values into the
// reply's string and the worker copied them once more into their blocks. Here:
// - a request's large field is written once, by the caller, straight into a gRPC slice sent
//   after the message's other fields (SliceFieldRequest, ps/detail/slice_field.h);
// - a reply's large field stays in the received slices, and the caller copies it once into its
//   place in the output (SliceFieldReply, ps/detail/field_bytes.h).
// The bytes on the wire are ps.proto's messages as before (a protobuf parser takes fields in
// any order), so the servers are unchanged and read these requests as plain messages.
//
// Both types plug into gRPC through SerializationTraits (in those two headers), so a call made
// with grpc::TemplatedGenericStub<SliceFieldRequest<...>, SliceFieldReply<...>> goes through
// the same channel, deadline and metadata as the generated stubs' calls.

#include <grpcpp/generic/generic_stub.h>

#include <string>

#include "ps/detail/field_bytes.h"
#include "ps/detail/slice_field.h"
#include "ps/rpc_meter.h"

namespace fleet::ps::detail {

// A request whose large field is written once, straight into a gRPC slice.
template <class Proto, int kField>
using SliceFieldRequest = SliceFieldMessage<Proto, kField>;

// A reply whose large field is left in the received slices (ps/detail/field_bytes.h).
template <class Proto, int kField>
using SliceFieldReply = ReceivedSliceFieldMessage<Proto, kField>;

// The full name of `method` of ps.proto's PsService, as a generic stub calls it.
std::string PsMethod(const char* method);

}  // namespace fleet::ps::detail
