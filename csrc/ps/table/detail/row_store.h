#pragma once
// The rows of one sparse shard: a compact open-addressing index over a slab of rows.
//
// Memory is the point of this class. A row lives in a slab chunk as
//   [key: 2 words][stamp: 1 word][value and state: width floats]
// (4-byte words), so the key is stored once, next to the data a lookup is about to read. The
// index is an array of 32-bit slots, each holding (tag << row_bits) | (row + 1) with 0 for empty;
// the tag is a few hash bits that skip most foreign rows without touching the slab. Linear
// probing, load kept in (0.53, 0.8] by growing 1.5x, bucket chosen by multiply-shift
// (Lemire, "Fast random integer generation in an interval", 2019) so the size need not be a power
// of two. At 8 floats a row this is 12 + 32 + ~6.5 bytes per row against 40 of key and floats.
//
// Not thread-safe: the owning shard locks.

#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "core/prefetch.h"

namespace fleet::ps::detail {

// A zero-initialised array. Large ones are mapped from the kernel directly: whole pages with no
// allocator header, and dropping one (the old index after a rehash) returns its pages at once
// instead of leaving a hole in the heap. At 10 million rows both matter against the 1.3x budget.
template <class T>
class PageArray {
 public:
  PageArray() = default;
  // std::bad_alloc when the memory cannot be had. `populate` faults every page in now, in one
  // call, for an array about to be written all over (an index): its first touch was otherwise a
  // read fault mapping the shared zero page, then a write fault copying it and flushing the
  // TLB on every core, a tenth of a 10M-row load.
  explicit PageArray(size_t size, bool populate = false);
  ~PageArray() { Release(); }
  PageArray(PageArray&& other) noexcept { *this = std::move(other); }
  PageArray& operator=(PageArray&& other) noexcept {
    if (this != &other) {
      Release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      mapped_ = std::exchange(other.mapped_, false);
    }
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() const { return data_; }
  T& operator[](size_t i) const { return data_[i]; }

 private:
  void Release();
  T* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
};

class RowStore {
 public:
  // Rows of `width` floats (value + update-rule state).
  explicit RowStore(size_t width);

  // The hash every user of a store must pass for `key`; the shard choice uses its low bits.
  static uint64_t Hash(int64_t key);

  // A batch of lookups runs in two passes so that the cache misses of many keys overlap:
  //   1. ProbeCandidates: for each hash, the first index slot whose tag matches (or the empty
  //      slot ending the probe), slots prefetched ahead. Only the index is read, so the branchy
  //      probe loop waits on index lines alone, not on rows.
  //   2. Per key, PrefetchCandidate a few keys ahead, then Confirm: the candidate row when its
  //      key matches, otherwise a full Find.
  // One pass (Find per key) spends most of its time with a row load stalled behind a mispredicted
  // probe: about 2x slower at a million rows (see benchmarks/ps_throughput.py).
  // A candidate is row + 1, or 0 for none; it stays a valid row (rows never move) while rows
  // are only inserted, so a batch may create rows between the passes: Confirm then finds them.
  void ProbeCandidates(const uint64_t* hashes, size_t n, uint32_t* candidates) const;
  // Prefetches the candidate row's key and its first `floats` floats (a row often straddles
  // two cache lines, and a pull reads only the value, a push the whole row).
  void PrefetchCandidate(uint32_t candidate, size_t floats) const {
    if (candidate == 0) return;
    const char* base = reinterpret_cast<const char*>(RowBase(candidate - 1));
    const char* last = base + (kHeaderWords + floats) * sizeof(float) - 1;
    for (const char* p = base; p <= last; p += 64) PrefetchForRead(p);
    PrefetchForRead(last);
  }
  float* Confirm(int64_t key, uint64_t hash, uint32_t candidate) const {
    if (candidate != 0 && candidate <= size_) {
      float* base = RowBase(candidate - 1);
      if (KeyOf(base) == key) return base + kHeaderWords;
    }
    return Find(key, hash);
  }

  // The data (width floats) of `key`'s row, or nullptr when absent.
  float* Find(int64_t key, uint64_t hash) const;
  // Find, or else Insert, in one probe (a load's path: most of its keys are new). *inserted says
  // which; nullptr when the shard is full.
  float* FindOrInsert(int64_t key, uint64_t hash, uint32_t stamp, bool* inserted);
  // Prefetches the first index slot of `hash`, for a FindOrInsert a few keys later.
  void PrefetchSlot(uint64_t hash) const {
    if (!slots_.empty()) PrefetchForRead(slots_.data() + Bucket(hash));
  }
  // Adds `key` (which must be absent) and returns its data, uninitialised, stamped `stamp`;
  // nullptr when the shard is full (about 1.7e9 rows).
  float* Insert(int64_t key, uint64_t hash, uint32_t stamp);
  // Sizes the index for `rows` rows in all, so that a load of a known row count rehashes once
  // instead of at every 1.5x step (each rehash rereads every key from the slab). The slab is
  // not mapped ahead: a load onto fewer servers than saved passes every part's rows, most of
  // which other servers keep, and mapping that much up front can fail where rows would fit.
  void Reserve(size_t rows);

  size_t size() const { return size_; }
  size_t width() const { return width_; }
  // Bytes of memory the slab chunks in use and the index hold (spare chunks mapped ahead and
  // never touched are not counted: they hold no pages).
  size_t MemoryBytes() const;

  // Stamp of a row returned by Find or Insert (the word before its data). Inline: a load, a
  // save and every push touch it once a row.
  static uint32_t GetStamp(const float* data) {
    uint32_t stamp;
    std::memcpy(&stamp, data - 1, sizeof(stamp));
    return stamp;
  }
  static void SetStamp(float* data, uint32_t stamp) {
    std::memcpy(data - 1, &stamp, sizeof(stamp));
  }

  // Calls fn(key, stamp, data) for every row, in slab order.
  void ForEach(absl::FunctionRef<void(int64_t, uint32_t, const float*)> fn) const;
  // Removes the rows for which drop(key, stamp, data) is true; returns how many.
  size_t RemoveIf(absl::FunctionRef<bool(int64_t, uint32_t, const float*)> drop);
  void Clear();

 private:
  static constexpr size_t kHeaderWords = 3;  // key (2) + stamp (1)
  // The slab grows by chunks that never move: 256 of 4096 rows (little slack while a shard is
  // small), then chunks of 65536 rows (few mappings when it is large).
  static constexpr size_t kSmallLog2 = 12;
  static constexpr size_t kSmallChunks = 256;
  static constexpr size_t kLargeLog2 = 16;
  static constexpr size_t kSmallRowsTotal = kSmallChunks << kSmallLog2;
  static size_t ChunkRows(size_t chunk) {
    return size_t{1} << (chunk < kSmallChunks ? kSmallLog2 : kLargeLog2);
  }
  // Chunks needed to hold `rows` rows.
  static size_t ChunksFor(size_t rows);

  float* RowBase(size_t row) const {
    if (row < kSmallRowsTotal) {
      return chunks_[row >> kSmallLog2] + (row & ((size_t{1} << kSmallLog2) - 1)) * stride_;
    }
    const size_t r = row - kSmallRowsTotal;
    return chunks_[kSmallChunks + (r >> kLargeLog2)] +
           (r & ((size_t{1} << kLargeLog2) - 1)) * stride_;
  }
  static int64_t KeyOf(const float* base) {
    int64_t key;
    std::memcpy(&key, base, sizeof(key));
    return key;
  }
  size_t Bucket(uint64_t hash) const {
    return static_cast<size_t>(((hash >> 32) * static_cast<uint64_t>(slots_.size())) >> 32);
  }
  uint32_t Tag(uint64_t hash) const { return static_cast<uint32_t>(hash) >> row_bits_; }
  // Pass 1 for one key: see ProbeCandidates.
  uint32_t ProbeOne(uint64_t hash) const;
  // Grows the index when one more row would pass load 0.8; false when it cannot grow.
  bool MakeRoomForOne();
  // Appends `key`'s row to the slab (not to the index) and returns its data, stamped.
  float* AppendRow(int64_t key, uint32_t stamp);
  void PlaceInIndex(size_t row, uint64_t hash);
  void Rehash(size_t capacity);
  // Appends chunks (one mapping for all of them) until they hold at least `rows` rows.
  void AddChunks(size_t rows);

  size_t width_;
  size_t stride_;  // words per row
  size_t size_ = 0;
  // chunks_[c] is chunk c of the slab; the memory belongs to mappings_, each holding one or more
  // consecutive chunks (mapping_first_chunk_[m] is the first of mapping m). A mapping of several
  // small chunks reaches the 2 MB-page threshold that no small chunk does alone: a 10M-row table
  // of 16 shards had every row in 4 KB pages (a fault per 4 KB as a load filled them).
  std::vector<float*> chunks_;
  std::vector<PageArray<float>> mappings_;
  std::vector<size_t> mapping_first_chunk_;
  size_t capacity_rows_ = 0;  // rows the chunks hold
  PageArray<uint32_t> slots_;
  uint32_t row_bits_ = 0;  // bits of (row + 1) in a slot; the rest are tag
};

}  // namespace fleet::ps::detail
