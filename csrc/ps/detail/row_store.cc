#include "ps/detail/row_store.h"

#include "ps/sharding.h"

namespace fleet::ps::detail {
namespace {

constexpr size_t kMinCapacity = 16;
// Slots may hold row + 1 < 2^31, leaving at least one tag bit.
constexpr size_t kMaxCapacity = size_t{1} << 31;

}  // namespace

RowStore::RowStore(size_t width) : width_(width), stride_(kHeaderWords + width) {}

uint64_t RowStore::Hash(int64_t key) {
  // Salted so that it is independent of the default server sharding (Mix64 of the bare key).
  return Mix64(static_cast<uint64_t>(key) ^ 0x632BE59BD9B4E019ULL);
}

uint32_t RowStore::GetStamp(const float* data) {
  uint32_t stamp;
  std::memcpy(&stamp, data - 1, sizeof(stamp));
  return stamp;
}

void RowStore::SetStamp(float* data, uint32_t stamp) {
  std::memcpy(data - 1, &stamp, sizeof(stamp));
}

float* RowStore::Find(int64_t key, uint64_t hash) const {
  if (size_ == 0) return nullptr;
  const size_t capacity = slots_.size();
  const uint32_t tag = Tag(hash);
  const uint32_t row_mask = (uint32_t{1} << row_bits_) - 1;
  for (size_t i = Bucket(hash);; i = (i + 1 == capacity) ? 0 : i + 1) {
    const uint32_t slot = slots_[i];
    if (slot == 0) return nullptr;
    if ((slot >> row_bits_) != tag) continue;
    float* base = RowBase((slot & row_mask) - 1);
    if (KeyOf(base) == key) return base + kHeaderWords;
  }
}

void RowStore::PlaceInIndex(size_t row, uint64_t hash) {
  const size_t capacity = slots_.size();
  size_t i = Bucket(hash);
  while (slots_[i] != 0) i = (i + 1 == capacity) ? 0 : i + 1;
  slots_[i] = (Tag(hash) << row_bits_) | static_cast<uint32_t>(row + 1);
}

void RowStore::Rehash(size_t capacity) {
  slots_.assign(capacity, 0);
  slots_.shrink_to_fit();
  row_bits_ = capacity == 0 ? 0 : static_cast<uint32_t>(64 - __builtin_clzll(capacity));
  for (size_t row = 0; row < size_; ++row) PlaceInIndex(row, Hash(KeyOf(RowBase(row))));
}

float* RowStore::Insert(int64_t key, uint64_t hash, uint32_t stamp) {
  // Grow before the load passes 0.8: (size + 1) / capacity > 4 / 5.
  if ((size_ + 1) * 5 > slots_.size() * 4) {
    size_t capacity = slots_.size() < kMinCapacity ? kMinCapacity : slots_.size() * 3 / 2;
    if (capacity > kMaxCapacity) return nullptr;
    Rehash(capacity);
  }
  const size_t row = size_;
  if ((row >> kChunkRowsLog2) == chunks_.size()) {
    chunks_.emplace_back(new float[kChunkRows * stride_]);
  }
  float* base = RowBase(row);
  std::memcpy(base, &key, sizeof(key));
  ++size_;
  PlaceInIndex(row, hash);
  float* data = base + kHeaderWords;
  SetStamp(data, stamp);
  return data;
}

size_t RowStore::MemoryBytes() const {
  return chunks_.size() * kChunkRows * stride_ * sizeof(float) +
         chunks_.capacity() * sizeof(chunks_[0]) + slots_.capacity() * sizeof(uint32_t);
}

void RowStore::ForEach(absl::FunctionRef<void(int64_t, uint32_t, const float*)> fn) const {
  for (size_t row = 0; row < size_; ++row) {
    const float* base = RowBase(row);
    fn(KeyOf(base), GetStamp(base + kHeaderWords), base + kHeaderWords);
  }
}

size_t RowStore::RemoveIf(absl::FunctionRef<bool(int64_t, uint32_t, const float*)> drop) {
  size_t kept = 0;
  for (size_t row = 0; row < size_; ++row) {
    float* base = RowBase(row);
    if (drop(KeyOf(base), GetStamp(base + kHeaderWords), base + kHeaderWords)) continue;
    if (kept != row) std::memcpy(RowBase(kept), base, stride_ * sizeof(float));
    ++kept;
  }
  const size_t removed = size_ - kept;
  size_ = kept;
  chunks_.resize((size_ + kChunkRows - 1) >> kChunkRowsLog2);
  size_t capacity = kMinCapacity;
  while (size_ * 5 > capacity * 4) capacity = capacity * 3 / 2;
  Rehash(size_ == 0 ? 0 : capacity);
  return removed;
}

void RowStore::Clear() {
  size_ = 0;
  chunks_.clear();
  chunks_.shrink_to_fit();
  slots_.clear();
  slots_.shrink_to_fit();
  row_bits_ = 0;
}

}  // namespace fleet::ps::detail
