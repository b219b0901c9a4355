#include "ps/table/detail/row_store.h"

#include <sys/mman.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "core/huge_pages.h"
#include "ps/sharding.h"

namespace fleet::ps::detail {
namespace {

constexpr size_t kMinCapacity = 16;
// Slots may hold row + 1 < 2^31, leaving at least one tag bit.
constexpr size_t kMaxCapacity = size_t{1} << 31;
#ifdef MADV_POPULATE_WRITE
constexpr int kMadvisePopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kMadvisePopulateWrite = 23;  // Linux 5.14; older C libraries lack the name
#endif

}  // namespace

template <class T>
PageArray<T>::PageArray(size_t size, bool populate) : size_(size) {
  const size_t bytes = size * sizeof(T);
  if (bytes >= (size_t{64} << 10)) {
    // Slab chunks of large shards, chunk groups and big indexes: 2 MB pages fault in 512x fewer
    // times as a load fills them, and random row reads miss the TLB far less (see
    // core/huge_pages.h). Only whole 2 MB pages inside the range can be huge, and mmap returns
    // 4 KB alignment: map 2 MB more and trim, so that a 5 MB chunk group is all huge pages
    // instead of as little as 2 MB of it.
    const bool huge = bytes >= kHugePageMinBytes;
    const size_t extra = huge ? kHugePageBytes : 0;
    void* p =
        ::mmap(nullptr, bytes + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    char* begin = static_cast<char*>(p);
    if (huge) {
      const uintptr_t at = reinterpret_cast<uintptr_t>(begin);
      char* aligned = begin + (((at + kHugePageBytes - 1) & ~(kHugePageBytes - 1)) - at);
      if (aligned > begin) ::munmap(begin, static_cast<size_t>(aligned - begin));
      const size_t tail = static_cast<size_t>(begin + bytes + extra - (aligned + bytes));
      if (tail > 0) ::munmap(aligned + bytes, tail);
      begin = aligned;
      AdviseHugePages(begin, bytes);
    }
    data_ = reinterpret_cast<T*>(begin);  // anonymous pages read as zero
    mapped_ = true;
    // Best effort: a kernel without MADV_POPULATE_WRITE (before 5.14) faults pages in on use.
    if (populate) ::madvise(begin, bytes, kMadvisePopulateWrite);
  } else if (size > 0) {
    data_ = static_cast<T*>(std::calloc(size, sizeof(T)));
    if (data_ == nullptr) throw std::bad_alloc();
  }
}

template <class T>
void PageArray<T>::Release() {
  if (mapped_) {
    ::munmap(data_, size_ * sizeof(T));
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  size_ = 0;
  mapped_ = false;
}

template class PageArray<float>;
template class PageArray<uint32_t>;

size_t RowStore::ChunksFor(size_t rows) {
  if (rows <= kSmallRowsTotal) return (rows + (size_t{1} << kSmallLog2) - 1) >> kSmallLog2;
  const size_t rest = rows - kSmallRowsTotal;
  return kSmallChunks + ((rest + (size_t{1} << kLargeLog2) - 1) >> kLargeLog2);
}

RowStore::RowStore(size_t width) : width_(width), stride_(kHeaderWords + width) {}

uint64_t RowStore::Hash(int64_t key) {
  // Salted so that it is independent of the default server sharding (Mix64 of the bare key).
  return Mix64(static_cast<uint64_t>(key) ^ 0x632BE59BD9B4E019ULL);
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

uint32_t RowStore::ProbeOne(uint64_t hash) const {
  const size_t capacity = slots_.size();
  const uint32_t row_mask = (uint32_t{1} << row_bits_) - 1;
  const uint32_t tag = Tag(hash);
  size_t i = Bucket(hash);
#if defined(__SSE2__)
  // The first 8 slots in two vector compares: one well-predicted branch instead of a
  // mispredicted exit from a loop of 1 to 8 scalar probes (2.9 on average at load 0.8).
  if (i + 8 <= capacity) {
    const __m128i tag_bits = _mm_set1_epi32(static_cast<int>(tag << row_bits_));
    const __m128i tag_mask = _mm_set1_epi32(static_cast<int>(~row_mask));
    const __m128i zero = _mm_setzero_si128();
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(slots_.data() + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(slots_.data() + i + 4));
    // A lane stops the probe when its tag matches or it is empty.
    const __m128i stop_a = _mm_or_si128(_mm_cmpeq_epi32(_mm_and_si128(a, tag_mask), tag_bits),
                                        _mm_cmpeq_epi32(a, zero));
    const __m128i stop_b = _mm_or_si128(_mm_cmpeq_epi32(_mm_and_si128(b, tag_mask), tag_bits),
                                        _mm_cmpeq_epi32(b, zero));
    const unsigned stops = static_cast<unsigned>(_mm_movemask_ps(_mm_castsi128_ps(stop_a))) |
                           static_cast<unsigned>(_mm_movemask_ps(_mm_castsi128_ps(stop_b))) << 4;
    if (stops != 0) return slots_[i + static_cast<size_t>(__builtin_ctz(stops))] & row_mask;
    // Wrap like the scalar loop: the 8 slots may end the array (found by ps_service_fuzz: a
    // read one past the index, past its mapping when that ends a page).
    i = (i + 8 == capacity) ? 0 : i + 8;
  }
#endif
  uint32_t slot = slots_[i];
  while (slot != 0 && (slot >> row_bits_) != tag) {
    i = (i + 1 == capacity) ? 0 : i + 1;
    slot = slots_[i];
  }
  return slot & row_mask;  // 0 for an empty slot: the key is absent
}

void RowStore::ProbeCandidates(const uint64_t* hashes, size_t n, uint32_t* candidates) const {
  if (size_ == 0) {
    std::fill(candidates, candidates + n, 0u);
    return;
  }
  // 32 keys ahead: a probe takes a few ns once its slots are cached, a miss over 100 ns on this
  // virtualised machine; 8 and 16 measured slower, 64 and 128 no faster (1M rows, 100k keys).
  constexpr size_t kSlotAhead = 32;
  for (size_t j = 0; j < n; ++j) {
    if (j + kSlotAhead < n) PrefetchForRead(slots_.data() + Bucket(hashes[j + kSlotAhead]));
    candidates[j] = ProbeOne(hashes[j]);
  }
}

void RowStore::PlaceInIndex(size_t row, uint64_t hash) {
  const size_t capacity = slots_.size();
  size_t i = Bucket(hash);
  while (slots_[i] != 0) i = (i + 1 == capacity) ? 0 : i + 1;
  slots_[i] = (Tag(hash) << row_bits_) | static_cast<uint32_t>(row + 1);
}

void RowStore::Rehash(size_t capacity) {
  slots_ = PageArray<uint32_t>(capacity, /*populate=*/true);
  row_bits_ = capacity == 0 ? 0 : static_cast<uint32_t>(64 - __builtin_clzll(capacity));
  for (size_t row = 0; row < size_; ++row) PlaceInIndex(row, Hash(KeyOf(RowBase(row))));
}

bool RowStore::MakeRoomForOne() {
  // Grow before the load passes 0.8: (size + 1) / capacity > 4 / 5.
  if ((size_ + 1) * 5 > slots_.size() * 4) {
    size_t capacity = slots_.size() < kMinCapacity ? kMinCapacity : slots_.size() * 3 / 2;
    if (capacity > kMaxCapacity) return false;
    Rehash(capacity);
  }
  return true;
}

float* RowStore::AppendRow(int64_t key, uint32_t stamp) {
  const size_t row = size_;
  if (row == capacity_rows_) {
    // Past the first 16 small chunks (65536 rows), 16 at a time: 5 MB at 8 floats a row, so the
    // mapping gets 2 MB pages, for at most 15 chunks of slack in a shard that already holds 16.
    const size_t c = chunks_.size();
    const size_t group = c >= 16 && c < kSmallChunks ? std::min<size_t>(16, kSmallChunks - c) : 1;
    AddChunks(capacity_rows_ + group * ChunkRows(c));
  }
  float* base = RowBase(row);
  std::memcpy(base, &key, sizeof(key));
  ++size_;
  float* data = base + kHeaderWords;
  SetStamp(data, stamp);
  return data;
}

float* RowStore::Insert(int64_t key, uint64_t hash, uint32_t stamp) {
  if (!MakeRoomForOne()) return nullptr;
  float* data = AppendRow(key, stamp);
  PlaceInIndex(size_ - 1, hash);
  return data;
}

float* RowStore::FindOrInsert(int64_t key, uint64_t hash, uint32_t stamp, bool* inserted) {
  *inserted = false;
  // Room first, so that the empty slot the probe ends on is still the key's slot afterwards.
  if (!MakeRoomForOne()) return Find(key, hash);
  const size_t capacity = slots_.size();
  const uint32_t tag = Tag(hash);
  const uint32_t row_mask = (uint32_t{1} << row_bits_) - 1;
  size_t i = Bucket(hash);
  for (;; i = (i + 1 == capacity) ? 0 : i + 1) {
    const uint32_t slot = slots_[i];
    if (slot == 0) break;
    if ((slot >> row_bits_) != tag) continue;
    float* base = RowBase((slot & row_mask) - 1);
    if (KeyOf(base) == key) return base + kHeaderWords;
  }
  *inserted = true;
  float* data = AppendRow(key, stamp);
  slots_[i] = (tag << row_bits_) | static_cast<uint32_t>(size_);  // row + 1 of the new row
  return data;
}

void RowStore::AddChunks(size_t rows) {
  const size_t first = chunks_.size();
  size_t words = 0, chunk_rows = capacity_rows_;
  for (size_t c = first; chunk_rows < rows; ++c) {
    words += ChunkRows(c) * stride_;
    chunk_rows += ChunkRows(c);
  }
  if (words == 0) return;
  PageArray<float> mapping(words);
  float* at = mapping.data();
  for (size_t c = first; capacity_rows_ < rows; ++c) {
    chunks_.push_back(at);
    at += ChunkRows(c) * stride_;
    capacity_rows_ += ChunkRows(c);
  }
  mappings_.push_back(std::move(mapping));
  mapping_first_chunk_.push_back(first);
}

void RowStore::Reserve(size_t rows) {
  size_t capacity = kMinCapacity;
  while (rows * 5 > capacity * 4) capacity = capacity * 3 / 2;
  if (capacity <= slots_.size() || capacity > kMaxCapacity) return;
  Rehash(capacity);
}

size_t RowStore::MemoryBytes() const {
  // The chunks up to the one holding the last row. The spare chunks of a group are never
  // touched until rows reach them, so they hold no memory; with 2 MB pages at most the page
  // holding the last row's chunk boundary is resident beyond it.
  size_t slab_rows = 0;
  for (size_t c = 0; c < ChunksFor(size_); ++c) slab_rows += ChunkRows(c);
  return slab_rows * stride_ * sizeof(float) + chunks_.capacity() * sizeof(chunks_[0]) +
         mappings_.capacity() * (sizeof(mappings_[0]) + sizeof(mapping_first_chunk_[0])) +
         slots_.size() * sizeof(uint32_t);
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
  // Return the mappings that hold no kept row; the last kept one may keep spare chunks.
  const size_t needed = ChunksFor(size_);
  while (!mappings_.empty() && mapping_first_chunk_.back() >= needed) {
    chunks_.resize(mapping_first_chunk_.back());
    mappings_.pop_back();
    mapping_first_chunk_.pop_back();
  }
  capacity_rows_ = 0;
  for (size_t c = 0; c < chunks_.size(); ++c) capacity_rows_ += ChunkRows(c);
  size_t capacity = kMinCapacity;
  while (size_ * 5 > capacity * 4) capacity = capacity * 3 / 2;
  Rehash(size_ == 0 ? 0 : capacity);
  return removed;
}

void RowStore::Clear() {
  size_ = 0;
  chunks_.clear();
  chunks_.shrink_to_fit();
  mappings_.clear();
  mappings_.shrink_to_fit();
  mapping_first_chunk_.clear();
  mapping_first_chunk_.shrink_to_fit();
  capacity_rows_ = 0;
  slots_ = PageArray<uint32_t>();
  row_bits_ = 0;
}

}  // namespace fleet::ps::detail
