#include "collective/detail/ring_allreduce.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"

namespace fleet::collective::detail {
namespace {

// Slots of Fleet's own algorithms, apart from Gloo's prefixes (0x01..0x08).
constexpr uint8_t kRingSlotPrefix = 0x46;
constexpr size_t kMaxSegmentBytes = 1 << 20;

using Clock = std::chrono::steady_clock;
using Buffer = std::unique_ptr<gloo::transport::UnboundBuffer>;

class Ring {
 public:
  Ring(const std::shared_ptr<gloo::Context>& context, const void* in, void* out, size_t count,
       size_t element_size, ReduceFn reduce, uint32_t tag, Duration timeout,
       std::vector<char>* scratch)
      : rank_(context->rank),
        size_(context->size),
        left_((rank_ + size_ - 1) % size_),
        right_((rank_ + 1) % size_),
        count_(count),
        element_size_(element_size),
        reduce_(reduce),
        deadline_(Clock::now() + timeout),
        in_ptr_(static_cast<const char*>(in)),
        out_ptr_(static_cast<char*>(out)),
        in_(context->createUnboundBuffer(const_cast<void*>(in), count * element_size)),
        out_(context->createUnboundBuffer(out, count * element_size)),
        scatter_slot_(gloo::Slot::build(kRingSlotPrefix, tag)),
        gather_slot_(scatter_slot_ + 1) {
    // At least two segments per chunk, so that even a small chunk overlaps receiving with
    // reducing; at most 1 MB each, as in Gloo's own ring.
    const size_t largest_elements = (count_ + size_ - 1) / size_;
    const size_t half = (largest_elements + 1) / 2 * element_size_;
    segment_bytes_ = std::min(kMaxSegmentBytes / element_size_ * element_size_, half);
    if (scratch->size() < 2 * segment_bytes_) scratch->resize(2 * segment_bytes_);
    tmp_ptr_ = scratch->data();
    tmp_ = context->createUnboundBuffer(tmp_ptr_, 2 * segment_bytes_);
  }

  void Run() {
    // Reduce-scatter: at step s this rank sends chunk (rank - s) and folds chunk (rank - s - 1)
    // into the output; after size - 1 steps it holds the full reduction of chunk rank + 1.
    for (int s = 0; s < size_ - 1; ++s) {
      Buffer& source = s == 0 ? in_ : out_;
      ScatterStep(source, Mod(rank_ - s), Mod(rank_ - s - 1));
    }
    // All-gather: pass the reduced chunks around the ring straight into the output.
    for (int s = 0; s < size_ - 1; ++s) GatherStep(Mod(rank_ + 1 - s), Mod(rank_ - s));
  }

 private:
  int Mod(int i) const { return ((i % size_) + size_) % size_; }
  size_t ChunkBegin(int c) const { return count_ * c / size_ * element_size_; }
  size_t ChunkBytes(int c) const { return ChunkBegin(c + 1) - ChunkBegin(c); }
  size_t Segments(int c) const { return (ChunkBytes(c) + segment_bytes_ - 1) / segment_bytes_; }
  std::chrono::milliseconds Remaining() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    return std::max(left, std::chrono::milliseconds(1));
  }

  // Sends chunk `send` from `source` to the right neighbour while receiving chunk `recv` from the
  // left one segment by segment (two in flight) and reducing each into the output.
  void ScatterStep(Buffer& source, int send, int recv) {
    const size_t send_segments = Segments(send);
    for (size_t j = 0; j < send_segments; ++j) {
      const size_t off = j * segment_bytes_;
      source->send(right_, scatter_slot_, ChunkBegin(send) + off,
                   std::min(segment_bytes_, ChunkBytes(send) - off));
    }
    const size_t recv_segments = Segments(recv);
    auto post = [&](size_t j) {
      const size_t len = std::min(segment_bytes_, ChunkBytes(recv) - j * segment_bytes_);
      tmp_->recv(left_, scatter_slot_, (j % 2) * segment_bytes_, len);
    };
    for (size_t j = 0; j < std::min<size_t>(2, recv_segments); ++j) post(j);
    for (size_t j = 0; j < recv_segments; ++j) {
      tmp_->waitRecv(Remaining());
      const size_t off = ChunkBegin(recv) + j * segment_bytes_;
      const size_t len = std::min(segment_bytes_, ChunkBytes(recv) - j * segment_bytes_);
      reduce_(out_ptr_ + off, in_ptr_ + off, tmp_ptr_ + (j % 2) * segment_bytes_,
              len / element_size_);
      if (j + 2 < recv_segments) post(j + 2);
    }
    for (size_t j = 0; j < send_segments; ++j) source->waitSend(Remaining());
  }

  void GatherStep(int send, int recv) {
    if (ChunkBytes(recv) > 0) out_->recv(left_, gather_slot_, ChunkBegin(recv), ChunkBytes(recv));
    if (ChunkBytes(send) > 0) out_->send(right_, gather_slot_, ChunkBegin(send), ChunkBytes(send));
    if (ChunkBytes(recv) > 0) out_->waitRecv(Remaining());
    if (ChunkBytes(send) > 0) out_->waitSend(Remaining());
  }

  const int rank_, size_, left_, right_;
  const size_t count_, element_size_;
  const ReduceFn reduce_;
  const Clock::time_point deadline_;
  const char* in_ptr_;
  char* out_ptr_;
  Buffer in_, out_;
  const uint64_t scatter_slot_, gather_slot_;
  size_t segment_bytes_ = 0;
  char* tmp_ptr_ = nullptr;  // two segments of the caller's scratch
  Buffer tmp_;
};

}  // namespace

void RingAllReduce(const std::shared_ptr<gloo::Context>& context, const void* in, void* out,
                   size_t count, size_t element_size, ReduceFn reduce, uint32_t tag,
                   Duration timeout, std::vector<char>* scratch) {
  if (count == 0) return;
  if (context->size == 1) {
    if (in != out) std::memcpy(out, in, count * element_size);
    return;
  }
  Ring(context, in, out, count, element_size, reduce, tag, timeout, scratch).Run();
}

}  // namespace fleet::collective::detail
