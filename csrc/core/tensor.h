#pragma once
// Tensor: a typed, shaped view of a reference-counted buffer on a Place (CPU memory, or the
// memory of a CUDA device when Fleet is compiled with CUDA; see core/device_memory.h).
//
// Copying a Tensor copies the view, not the memory (the buffer is shared). Kernels size their
// outputs with Resize() and then call mutable_data<T>(), which allocates only when the buffer is
// missing, shared with nothing bigger, or too small. A Tensor is not thread-safe: one writer at a
// time, as the executor guarantees for the variables of one scope.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/errors.h"
#include "core/place.h"

namespace fleet {

using Shape = std::vector<int64_t>;

// Product of the dimensions; throws InvalidArgument on a negative dimension.
int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);

// Memory owned by a deleter: Fleet's aligned allocator, a foreign owner (a NumPy array), or a
// device's caching allocator (then place() is that device).
class Buffer {
 public:
  // Allocates `bytes` bytes aligned to 64 for SIMD kernels; 4 MB or more on huge pages (see
  // core/huge_pages.h).
  explicit Buffer(size_t bytes);
  // Wraps foreign memory; `release` runs when the last Tensor using it goes away.
  Buffer(void* data, size_t bytes, std::function<void()> release, Place place = CPUPlace());
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const Place& place() const { return place_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  std::function<void()> release_;
  Place place_;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape) : shape_(std::move(shape)), dtype_(dtype) {}

  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  // Dimension i; negative i counts from the end.
  int64_t dim(int i) const;
  int64_t numel() const { return NumElements(shape_); }
  DType dtype() const { return dtype_; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * SizeOf(dtype_); }
  // Where the memory is: the CPU until memory on a device is allocated or shared into it.
  Place place() const { return buffer_ == nullptr ? Place{} : buffer_->place(); }
  // True once memory has been allocated or shared into this tensor.
  bool initialized() const { return buffer_ != nullptr; }

  // Sets the shape; memory follows on the next mutable_data(). Resizing to the current shape
  // writes nothing, so threads may Resize a shared tensor in place to its own shape.
  Tensor& Resize(Shape shape);
  void set_dtype(DType dtype) { dtype_ = dtype; }

  // Sets the dtype to T and returns writable memory for numel() elements.
  template <typename T>
  T* mutable_data() {
    return static_cast<T*>(mutable_data(DTypeOf<T>::value));
  }
  // CPU memory: a tensor whose buffer is on a device gets fresh CPU memory.
  void* mutable_data(DType dtype);
  // Memory on `place` (device kernels): allocated on `place` when the buffer is missing, too
  // small or elsewhere. Unavailable for a CUDA place in a build without CUDA.
  void* mutable_data(DType dtype, Place place);
  template <typename T>
  T* mutable_data(Place place) {
    return static_cast<T*>(mutable_data(DTypeOf<T>::value, place));
  }

  // Read access; throws InvalidArgument if uninitialised or of another dtype.
  template <typename T>
  const T* data() const {
    CheckReadable(DTypeOf<T>::value);
    return reinterpret_cast<const T*>(static_cast<const char*>(buffer_->data()) + offset_);
  }
  template <typename T>
  T* data() {
    CheckReadable(DTypeOf<T>::value);
    return reinterpret_cast<T*>(static_cast<char*>(buffer_->data()) + offset_);
  }
  const void* raw_data() const;

  // Makes this tensor a view of other's memory (same shape and dtype).
  void ShareDataWith(const Tensor& other);
  // Deep copy of other's shape, dtype and elements into memory of this tensor's own, on the
  // place of other's memory.
  void CopyFrom(const Tensor& other);
  // Rows [begin, end) along dimension 0, sharing memory.
  Tensor Slice(int64_t begin, int64_t end) const;
  // Fills every element with zero bytes (allocating on the CPU if needed; on its device when the
  // tensor already has device memory).
  void SetZero();
  // Adopts a buffer; used by the bindings to borrow NumPy memory without a copy.
  void ResetBuffer(std::shared_ptr<Buffer> buffer, DType dtype, Shape shape);

 private:
  void CheckReadable(DType dtype) const;

  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;  // bytes from buffer_->data() to element 0
  Shape shape_;
  DType dtype_ = DType::kFloat32;
};

}  // namespace fleet
