#pragma once
// A ps.proto message whose large bytes field travels in a gRPC slice of its own, written once
// by the sender, instead of being copied into the message's string and again by protobuf into
// gRPC's slices. A worker sends dense gradients this way (client/detail/dense_wire.h); a server
// sends dense values this way (server/detail/service.cc). The bytes on the wire are the plain
// message (a protobuf parser takes fields in any order), so the receiver needs nothing special.

#include <grpc/slice.h>
#include <grpcpp/impl/serialization_traits.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "ps/rpc_meter.h"

namespace fleet::ps::detail {

// Appends `value` as a protobuf varint.
void AppendVarint(uint64_t value, std::string* out);

// The bytes of a protobuf field's tag and length prefix: wire type 2 (length-delimited).
std::string LengthDelimitedPrefix(int field, size_t length);

// A message `Proto` whose bytes field `kField` travels in a gRPC slice of its own. `header`
// holds every other field (its field kField stays empty); `payload` the field's bytes. Movable,
// and copyable by reference (a gRPC slice is reference-counted and never written once sent), so
// a message sent again reuses the same bytes.
template <class Proto, int kField>
struct SliceFieldMessage {
  Proto header;
  grpc::Slice payload;

  // Gives the payload `bytes` bytes, uninitialised, and returns where to write them: heap
  // memory, never bytes inlined in the slice object (which move with it). The message must not
  // have been sent yet.
  char* AllocatePayload(size_t bytes) {
    payload = grpc::Slice(grpc_slice_malloc_large(bytes), grpc::Slice::STEAL_REF);
    return reinterpret_cast<char*>(const_cast<uint8_t*>(payload.begin()));
  }
  // The size of the message on the wire. An empty payload is left out, as protobuf leaves out
  // an empty bytes field.
  size_t ByteSizeLong() const {
    if (payload.size() == 0) return header.ByteSizeLong();
    return header.ByteSizeLong() + LengthDelimitedPrefix(kField, payload.size()).size() +
           payload.size();
  }
};

// The kind of call for the RPC meter (found by argument-dependent lookup).
template <class Proto, int kField>
RpcKind RpcKindOf(const SliceFieldMessage<Proto, kField>& message) {
  return ::fleet::ps::RpcKindOf(message.header);
}

}  // namespace fleet::ps::detail

namespace grpc {

template <class Proto, int kField>
class SerializationTraits<fleet::ps::detail::SliceFieldMessage<Proto, kField>, void> {
 public:
  static Status Serialize(const fleet::ps::detail::SliceFieldMessage<Proto, kField>& message,
                          ByteBuffer* buffer, bool* own_buffer) {
    std::string head;
    if (!message.header.AppendToString(&head)) {
      return Status(StatusCode::INTERNAL, "cannot serialize " + message.header.GetTypeName());
    }
    const bool payload = message.payload.size() > 0;
    if (payload) head += fleet::ps::detail::LengthDelimitedPrefix(kField, message.payload.size());
    const Slice slices[2] = {Slice(head), message.payload};
    ByteBuffer serialized(slices, payload ? 2 : 1);
    buffer->Swap(&serialized);
    *own_buffer = true;
    return Status::OK;
  }
};

}  // namespace grpc
