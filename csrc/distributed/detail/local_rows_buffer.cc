#include "distributed/detail/local_rows_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <new>

namespace fleet::distributed::detail {

LocalRowsBuffer::~LocalRowsBuffer() {
  if (data_ != nullptr) munmap(data_, capacity_bytes_);
}

void LocalRowsBuffer::Append(size_t n) {
  const size_t needed = (size_ + n) * sizeof(float);
  if (needed > capacity_bytes_) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    // 16 pages at least: a shard's first rows do not remap every few insertions.
    size_t capacity = std::max({needed, 2 * capacity_bytes_, 16 * page});
    capacity = (capacity + page - 1) / page * page;
    void* mapped = data_ == nullptr ? mmap(nullptr, capacity, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                                    : mremap(data_, capacity_bytes_, capacity, MREMAP_MAYMOVE);
    if (mapped == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<float*>(mapped);
    capacity_bytes_ = capacity;
  }
  size_ += n;
}

}  // namespace fleet::distributed::detail
