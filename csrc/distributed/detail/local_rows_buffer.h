#pragma once
// The row storage of one LocalRows shard (local_rows.h): floats that only grow, in anonymous
// memory that grows by mremap. A GEO worker inserts ~107k rows (20 MB) over a CTR-DNN pass, most
// of them early. With a vector, each doubling of a shard's rows allocated new memory, copied every
// row into it and freed the old, in bursts at the steps where the 16 shards (filled evenly)
// doubled together. Growing the mapping moves page-table entries instead: rows are never copied,
// and a page is first touched when a row is written into it.
//
// Not thread-safe (the shard's mutex guards it). Append may move the storage: pointers into it are
// valid until the next Append (LocalRows keeps row indices, not pointers, across insertions).

#include <cstddef>

namespace fleet::distributed::detail {

class LocalRowsBuffer {
 public:
  LocalRowsBuffer() = default;
  ~LocalRowsBuffer();
  LocalRowsBuffer(const LocalRowsBuffer&) = delete;
  LocalRowsBuffer& operator=(const LocalRowsBuffer&) = delete;

  // Page-aligned (so on a cache line); null while empty.
  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }
  // Appends `n` floats, all 0 (fresh anonymous pages are zero-filled and never reused), doubling
  // the mapping when it is full. Throws std::bad_alloc when the kernel refuses the memory.
  void Append(size_t n);

 private:
  float* data_ = nullptr;
  size_t size_ = 0;            // floats in use
  size_t capacity_bytes_ = 0;  // bytes mapped, a whole number of pages
};

}  // namespace fleet::distributed::detail
