#include "ps/detail/field_bytes.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ps/detail/slice_field.h"

namespace fleet::ps::detail {
namespace {

constexpr int kWireVarint = 0, kWireFixed64 = 1, kWireLengthDelimited = 2, kWireFixed32 = 5;

// Reads a message byte by byte across its slices (varints and short fields may straddle two).
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices) : slices_(slices) { SkipEmpty(); }

  bool AtEnd() const { return slice_ == slices_.size(); }
  size_t position() const { return position_; }

  bool ReadByte(uint8_t* byte) {
    if (AtEnd()) return false;
    *byte = slices_[slice_].begin()[offset_];
    Advance(1);
    return true;
  }
  bool ReadVarint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte;
      if (!ReadByte(&byte)) return false;
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;  // more than 10 bytes
  }
  // Passes over `n` bytes, calling visit(data, size) for each piece; false when fewer remain.
  template <class Visit>
  bool Take(size_t n, Visit visit) {
    while (n > 0) {
      if (AtEnd()) return false;
      const grpc::Slice& slice = slices_[slice_];
      const size_t piece = std::min(n, slice.size() - offset_);
      visit(reinterpret_cast<const char*>(slice.begin()) + offset_, piece);
      Advance(piece);
      n -= piece;
    }
    return true;
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    position_ += n;
    if (offset_ == slices_[slice_].size()) {
      ++slice_;
      offset_ = 0;
      SkipEmpty();
    }
  }
  void SkipEmpty() {
    while (slice_ < slices_.size() && slices_[slice_].size() == 0) ++slice_;
  }

  const std::vector<grpc::Slice>& slices_;
  size_t slice_ = 0;
  size_t offset_ = 0;
  size_t position_ = 0;  // bytes read so far
};

grpc::Status Malformed(const std::string& what, size_t position) {
  return grpc::Status(grpc::StatusCode::INTERNAL,
                      absl::StrCat("malformed message: ", what, " at byte ", position));
}

}  // namespace

void FieldBytes::CopyOut(size_t offset, size_t n, void* dst) const {
  if (n == 0) return;
  char* out = static_cast<char*>(dst);
  // The last segment that begins at or before `offset`.
  auto it = std::upper_bound(segments_.begin(), segments_.end(), offset,
                             [](size_t o, const Segment& s) { return o < s.offset; });
  --it;
  while (n > 0) {
    const size_t skip = offset - it->offset;
    const size_t piece = std::min(n, it->size - skip);
    std::memcpy(out, it->data + skip, piece);
    out += piece;
    offset += piece;
    n -= piece;
    ++it;
  }
}

grpc::Status FieldBytes::Split(const grpc::ByteBuffer& buffer, int field, std::string* others) {
  slices_.clear();
  segments_.clear();
  size_ = 0;
  others->clear();
  grpc::Status dumped = buffer.Dump(&slices_);
  if (!dumped.ok()) return dumped;
  SliceCursor cursor(slices_);
  auto copy_to_others = [others](const char* data, size_t n) { others->append(data, n); };
  while (!cursor.AtEnd()) {
    const size_t field_start = cursor.position();
    uint64_t tag;
    if (!cursor.ReadVarint(&tag)) return Malformed("truncated tag", field_start);
    const int number = static_cast<int>(tag >> 3);
    const int wire_type = static_cast<int>(tag & 7);
    if (number == field) {
      if (wire_type != kWireLengthDelimited) {
        return Malformed(absl::StrCat("field ", field, " has wire type ", wire_type), field_start);
      }
      uint64_t length;
      if (!cursor.ReadVarint(&length)) return Malformed("truncated length", field_start);
      // A repeated occurrence replaces the earlier one, as protobuf's parse does.
      segments_.clear();
      size_ = 0;
      const bool whole = cursor.Take(length, [this](const char* data, size_t n) {
        segments_.push_back({size_, data, n});
        size_ += n;
      });
      if (!whole) return Malformed(absl::StrCat("field ", field, " truncated"), field_start);
      continue;
    }
    AppendVarint(tag, others);
    uint64_t length = 0;
    switch (wire_type) {
      case kWireVarint: {
        uint64_t value;
        if (!cursor.ReadVarint(&value)) return Malformed("truncated varint", field_start);
        AppendVarint(value, others);
        continue;
      }
      case kWireFixed64:
        length = 8;
        break;
      case kWireFixed32:
        length = 4;
        break;
      case kWireLengthDelimited:
        if (!cursor.ReadVarint(&length)) return Malformed("truncated length", field_start);
        AppendVarint(length, others);
        break;
      default:
        return Malformed(absl::StrCat("wire type ", wire_type, " of field ", number), field_start);
    }
    if (!cursor.Take(length, copy_to_others)) {
      return Malformed(absl::StrCat("field ", number, " truncated"), field_start);
    }
  }
  return grpc::Status::OK;
}

}  // namespace fleet::ps::detail
