#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_join.h"
#include "core/device_memory.h"
#include "core/huge_pages.h"

namespace fleet {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    FLEET_ENFORCE(d >= 0, InvalidArgument, "shape ", ShapeToString(shape),
                  " has a negative dimension; a runtime tensor needs concrete sizes");
    n *= d;
  }
  return n;
}

std::string ShapeToString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

Buffer::Buffer(size_t bytes) : size_(bytes) {
  // Large buffers start on a 2 MB boundary so that all of them can be huge pages.
  const size_t align = bytes >= kHugePageMinBytes ? kHugePageBytes : 64;
  size_t rounded = (bytes + align - 1) / align * align;
  data_ = std::aligned_alloc(align, rounded == 0 ? align : rounded);
  if (data_ == nullptr) {
    throw OutOfMemory(absl::StrCat("out of memory allocating ", bytes, " bytes"));
  }
  if (bytes >= kHugePageMinBytes) AdviseHugePages(data_, rounded);
  release_ = [p = data_] { std::free(p); };
}

Buffer::Buffer(void* data, size_t bytes, std::function<void()> release, Place place)
    : data_(data), size_(bytes), release_(std::move(release)), place_(place) {}

Buffer::~Buffer() {
  if (release_) release_();
}

int64_t Tensor::dim(int i) const {
  int r = rank();
  int j = i < 0 ? i + r : i;
  FLEET_ENFORCE(j >= 0 && j < r, InvalidArgument, "dimension ", i, " is out of range for shape ",
                ShapeToString(shape_));
  return shape_[j];
}

Tensor& Tensor::Resize(Shape shape) {
  // Writes nothing when the shape is unchanged: Hogwild trainer threads update shared parameters
  // in place, and a move-assignment would free the shape another thread is reading.
  if (shape != shape_) shape_ = std::move(shape);
  return *this;
}

void* Tensor::mutable_data(DType dtype) {
  if (dtype_ != dtype) dtype_ = dtype;  // no write to a shared tensor, as in Resize
  size_t need = static_cast<size_t>(NumElements(shape_)) * SizeOf(dtype);
  if (buffer_ == nullptr || buffer_->size() < offset_ + need ||
      buffer_->place().device != DeviceType::kCPU) {
    buffer_ = std::make_shared<Buffer>(need);
    offset_ = 0;
  }
  return static_cast<char*>(buffer_->data()) + offset_;
}

void* Tensor::mutable_data(DType dtype, Place place) {
  if (place.device == DeviceType::kCPU) return mutable_data(dtype);
  if (dtype_ != dtype) dtype_ = dtype;
  size_t need = static_cast<size_t>(NumElements(shape_)) * SizeOf(dtype);
  if (buffer_ == nullptr || buffer_->size() < offset_ + need || !(buffer_->place() == place)) {
    buffer_ = AllocateBuffer(need, place);
    offset_ = 0;
  }
  return static_cast<char*>(buffer_->data()) + offset_;
}

const void* Tensor::raw_data() const {
  FLEET_ENFORCE(buffer_ != nullptr, InvalidArgument, "tensor of shape ", ShapeToString(shape_),
                " is not initialised");
  return static_cast<const char*>(buffer_->data()) + offset_;
}

void Tensor::CheckReadable(DType dtype) const {
  FLEET_ENFORCE(buffer_ != nullptr, InvalidArgument, "tensor of shape ", ShapeToString(shape_),
                " is read before it holds data");
  FLEET_ENFORCE(dtype_ == dtype, InvalidArgument, "tensor holds ", DTypeName(dtype_),
                " but is read as ", DTypeName(dtype));
}

void Tensor::ShareDataWith(const Tensor& other) {
  buffer_ = other.buffer_;
  offset_ = other.offset_;
  shape_ = other.shape_;
  dtype_ = other.dtype_;
}

void Tensor::CopyFrom(const Tensor& other) {
  if (&other == this) return;
  Shape shape = other.shape_;
  DType dtype = other.dtype_;
  const void* src = other.raw_data();
  const Place place = other.place();
  // Fresh memory: `other` may share our buffer.
  auto fresh = place.device == DeviceType::kCPU ? std::make_shared<Buffer>(other.nbytes())
                                                : AllocateBuffer(other.nbytes(), place);
  buffer_ = std::move(fresh);
  offset_ = 0;
  shape_ = std::move(shape);
  dtype_ = dtype;
  if (place.device == DeviceType::kCPU) {
    std::memcpy(buffer_->data(), src, nbytes());
  } else {
    CopyBytes(buffer_->data(), place, src, place, nbytes());
  }
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  FLEET_ENFORCE(rank() >= 1 && begin >= 0 && begin <= end && end <= shape_[0], InvalidArgument,
                "slice [", begin, ", ", end, ") is out of range for shape ", ShapeToString(shape_));
  Tensor out;
  out.buffer_ = buffer_;
  out.dtype_ = dtype_;
  out.shape_ = shape_;
  out.shape_[0] = end - begin;
  int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
  out.offset_ = offset_ + static_cast<size_t>(begin * row) * SizeOf(dtype_);
  return out;
}

void Tensor::SetZero() {
  const Place place = this->place();
  if (place.device == DeviceType::kCPU) {
    std::memset(mutable_data(dtype_), 0, nbytes());
  } else {
    ZeroBytes(mutable_data(dtype_, place), place, nbytes());
  }
}

void Tensor::ResetBuffer(std::shared_ptr<Buffer> buffer, DType dtype, Shape shape) {
  buffer_ = std::move(buffer);
  offset_ = 0;
  dtype_ = dtype;
  shape_ = std::move(shape);
}

std::string Place::ToString() const {
  return device == DeviceType::kCPU ? "CPUPlace" : absl::StrCat("CUDAPlace(", device_id, ")");
}

}  // namespace fleet
