#pragma once
// A received ps.proto message whose large bytes field is left in the slices gRPC received it in,
// instead of being copied by protobuf's parse into the message's string. The receiver copies
// the bytes once, straight to where they belong (a worker into its dense blocks, a server into
// its table). The sending side's counterpart is SliceFieldMessage (slice_field.h); the bytes on
// the wire are the plain message either way, so a receiver of this kind takes messages from any
// sender.

#include <grpcpp/impl/serialization_traits.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "fleet/ps/ps.pb.h"

namespace fleet::ps::detail {

// The bytes of one length-delimited field of a received message, left in the message's slices.
// Read-only and thread-compatible.
class FieldBytes {
 public:
  size_t size() const { return size_; }
  // Copies the field's bytes [offset, offset + n) into `dst`; they must lie within size().
  void CopyOut(size_t offset, size_t n, void* dst) const;
  // Copies the field's bytes as consecutive pieces of `piece` bytes, piece j to `dst(j)` (a
  // pointer to `piece` writable bytes), for j < size() / piece, in one pass over the slices: a
  // piece that straddles two slices is copied in two parts. For rows going to scattered places
  // (a sparse pull's rows to their callers' positions), where CopyOut per row would search the
  // slices for every row.
  template <class Dst>
  void CopyPieces(size_t piece, Dst dst) const;

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

template <class Dst>
void FieldBytes::CopyPieces(size_t piece, Dst dst) const {
  const size_t count = piece == 0 ? 0 : size_ / piece;
  size_t segment = 0;
  size_t skip = 0;  // bytes of segments_[segment] already copied
  for (size_t j = 0; j < count; ++j) {
    char* out = static_cast<char*>(static_cast<void*>(dst(j)));
    size_t left = piece;
    while (left > 0) {
      const Segment& s = segments_[segment];
      const size_t n = std::min(left, s.size - skip);
      std::memcpy(out, s.data + skip, n);
      out += n;
      left -= n;
      skip += n;
      if (skip == s.size) {
        ++segment;
        skip = 0;
      }
    }
  }
}

// A received message `Proto` whose bytes field `kField` is left in the received slices: the
// other fields are parsed into header(), and values() reads the field's bytes. A worker receives
// replies this way (client/detail/dense_wire.h); a server can receive requests this way.
template <class Proto, int kField>
class ReceivedSliceFieldMessage {
 public:
  const Proto& header() const { return header_; }
  // A reply's status (only for messages that have one).
  const proto::RpcStatus& status() const { return header_.status(); }
  const FieldBytes& values() const { return values_; }
  // The message's size on the wire, as a parsed message's ByteSizeLong() gives it (the values
  // field's tag and length prefix included), so that the RPC meters of a client and its server
  // count the same bytes.
  size_t ByteSizeLong() const { return wire_size_; }

  // What SerializationTraits::Deserialize does (INTERNAL for a message that does not parse).
  grpc::Status Parse(const grpc::ByteBuffer& buffer) {
    wire_size_ = buffer.Length();
    std::string others;
    grpc::Status split = values_.Split(buffer, kField, &others);
    if (!split.ok()) return split;
    if (!header_.ParseFromString(others)) {
      return grpc::Status(
          grpc::StatusCode::INTERNAL,
          "the message's fields besides its values do not parse as " + header_.GetTypeName());
    }
    return grpc::Status::OK;
  }

 private:
  Proto header_;
  FieldBytes values_;
  size_t wire_size_ = 0;
};

}  // namespace fleet::ps::detail

namespace grpc {

template <class Proto, int kField>
class SerializationTraits<fleet::ps::detail::ReceivedSliceFieldMessage<Proto, kField>, void> {
 public:
  static Status Deserialize(ByteBuffer* buffer,
                            fleet::ps::detail::ReceivedSliceFieldMessage<Proto, kField>* message) {
    Status status = message->Parse(*buffer);
    buffer->Clear();
    return status;
  }
};

}  // namespace grpc
