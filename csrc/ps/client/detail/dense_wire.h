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
//   place in the output (SliceFieldReply).
// The bytes on the wire are ps.proto's messages as before (a protobuf parser takes fields in
// any order), so the servers are unchanged and read these requests as plain messages.
//
// Both types plug into gRPC through SerializationTraits (below), so a call made with
// grpc::TemplatedGenericStub<SliceFieldRequest<...>, SliceFieldReply<...>> goes through the
// same channel, deadline and metadata as the generated stubs' calls.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/impl/serialization_traits.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <string>
#include <vector>

#include "fleet/ps/ps.pb.h"
#include "ps/detail/slice_field.h"
#include "ps/rpc_meter.h"

namespace fleet::ps::detail {

// A request whose large field is written once, straight into a gRPC slice.
template <class Proto, int kField>
using SliceFieldRequest = SliceFieldMessage<Proto, kField>;

// The bytes of one length-delimited field of a received message, left in the message's slices.
// Read-only and thread-compatible.
class FieldBytes {
 public:
  size_t size() const { return size_; }
  // Copies the field's bytes [offset, offset + n) into `dst`; they must lie within size().
  void CopyOut(size_t offset, size_t n, void* dst) const;

  // Splits a received message: the bytes of its field `field` (the last occurrence, as protobuf
  // keeps) stay in `buffer`'s slices, whose references this keeps; the bytes of every other field,
  // tags included, go to `*others`, a message protobuf can parse. Fails with INTERNAL naming
  // what is malformed (a truncated varint or field, a group, an unknown wire type, or field
  // `field` not length-delimited).
  grpc::Status Split(const grpc::ByteBuffer& buffer, int field, std::string* others);

 private:
  struct Segment {
    size_t offset;  // of its first byte within the field
    const char* data;
    size_t size;
  };
  std::vector<grpc::Slice> slices_;  // keeps the segments' memory alive
  std::vector<Segment> segments_;
  size_t size_ = 0;
};

// A reply message `Proto` whose bytes field `kField` is left in the received slices: the other
// fields are parsed into header(), and values() reads the field's bytes.
template <class Proto, int kField>
class SliceFieldReply {
 public:
  const Proto& header() const { return header_; }
  const proto::RpcStatus& status() const { return header_.status(); }
  const FieldBytes& values() const { return values_; }
  size_t ByteSizeLong() const { return header_.ByteSizeLong() + values_.size(); }

  // What SerializationTraits::Deserialize does (INTERNAL for a message that does not parse).
  grpc::Status Parse(const grpc::ByteBuffer& buffer) {
    std::string others;
    grpc::Status split = values_.Split(buffer, kField, &others);
    if (!split.ok()) return split;
    if (!header_.ParseFromString(others)) {
      return grpc::Status(
          grpc::StatusCode::INTERNAL,
          "the reply's fields besides its values do not parse as " + header_.GetTypeName());
    }
    return grpc::Status::OK;
  }

 private:
  Proto header_;
  FieldBytes values_;
};

// The full name of `method` of ps.proto's PsService, as a generic stub calls it.
std::string PsMethod(const char* method);

}  // namespace fleet::ps::detail

namespace grpc {

template <class Proto, int kField>
class SerializationTraits<fleet::ps::detail::SliceFieldReply<Proto, kField>, void> {
 public:
  static Status Deserialize(ByteBuffer* buffer,
                            fleet::ps::detail::SliceFieldReply<Proto, kField>* reply) {
    Status status = reply->Parse(*buffer);
    buffer->Clear();
    return status;
  }
};

}  // namespace grpc
