#include "data/slots.h"

#include <algorithm>
#include <cstring>
#include <memory>

namespace fleet::data {
namespace {

size_t ColumnLength(const SlotSpec& slot, const SlotColumn& column, size_t samples) {
  return slot.dense ? samples * static_cast<size_t>(slot.width) : column.offsets.back();
}

// A tensor viewing the vector's memory; the vector lives as long as the tensor's buffer.
template <typename T>
void AdoptVector(std::vector<T>&& values, DType dtype, Shape shape, Tensor* out) {
  auto holder = std::make_shared<std::vector<T>>(std::move(values));
  void* data = holder->data();
  size_t bytes = holder->size() * sizeof(T);
  auto buffer = std::make_shared<Buffer>(data, bytes, [holder]() mutable { holder.reset(); });
  out->ResetBuffer(std::move(buffer), dtype, std::move(shape));
}

template <typename T>
void AppendPod(std::string* out, const T* data, size_t n) {
  out->append(reinterpret_cast<const char*>(data), n * sizeof(T));
}

// Reads n values of T from bytes at *pos; throws when the bytes run out.
template <typename T>
void ReadPod(std::string_view bytes, size_t* pos, size_t n, std::vector<T>* out) {
  size_t len = n * sizeof(T);
  FLEET_ENFORCE(n <= bytes.size() && *pos + len <= bytes.size(), InvalidArgument,
                "serialised sample block is truncated (", bytes.size(), " bytes)");
  size_t old = out->size();
  out->resize(old + n);
  std::memcpy(out->data() + old, bytes.data() + *pos, len);
  *pos += len;
}

}  // namespace

SlotSpec MakeSlotSpec(const std::string& name, DType dtype, int lod_level, const Shape& shape) {
  SlotSpec slot;
  slot.name = name;
  FLEET_ENFORCE(dtype == DType::kInt64 || dtype == DType::kFloat32, InvalidArgument, "slot '", name,
                "': datasets feed int64 or float32 variables, not ", DTypeName(dtype));
  slot.type = dtype == DType::kInt64 ? SlotType::kInt64 : SlotType::kFloat32;
  FLEET_ENFORCE(lod_level == 0 || lod_level == 1, InvalidArgument, "slot '", name,
                "': lod_level must be 0 (dense) or 1 (variable length), got ", lod_level);
  slot.dense = lod_level == 0;
  slot.shape = shape.empty() ? Shape{-1} : shape;
  int batch_axes = 0;
  slot.width = 1;
  for (size_t i = 0; i < slot.shape.size(); ++i) {
    if (slot.shape[i] < 0) {
      ++batch_axes;
      slot.batch_axis = static_cast<int64_t>(i);
    } else {
      slot.width *= slot.shape[i];
    }
  }
  FLEET_ENFORCE(batch_axes == 1, InvalidArgument, "slot '", name, "': shape ", ShapeToString(shape),
                " must have exactly one -1 (batch) dimension");
  FLEET_ENFORCE(slot.dense || slot.width == 1, InvalidArgument, "slot '", name,
                "': a lod_level-1 slot holds one value per row, so its shape must be [-1, 1] "
                "or [-1], got ",
                ShapeToString(shape));
  FLEET_ENFORCE(slot.width > 0, InvalidArgument, "slot '", name, "': shape ", ShapeToString(shape),
                " has no room for values");
  return slot;
}

SampleBlock::SampleBlock(const std::vector<SlotSpec>* slots)
    : slots_(slots), columns_(slots->size()) {}

void SampleBlock::Rollback() {
  for (size_t i = 0; i < columns_.size(); ++i) {
    const SlotSpec& slot = (*slots_)[i];
    SlotColumn& c = columns_[i];
    if (!slot.dense) c.offsets.resize(size_ + 1);
    size_t len = ColumnLength(slot, c, size_);
    if (slot.type == SlotType::kInt64) {
      c.ids.resize(len);
    } else {
      c.values.resize(len);
    }
  }
}

void SampleBlock::Reserve(size_t samples, const SampleBlock* like) {
  for (size_t i = 0; i < columns_.size(); ++i) {
    const SlotSpec& slot = (*slots_)[i];
    SlotColumn& c = columns_[i];
    size_t values = samples * static_cast<size_t>(slot.width);
    if (!slot.dense) {
      c.offsets.reserve(samples + 1);
      if (like != nullptr && !like->empty()) {
        size_t seen = ColumnLength(slot, like->columns_[i], like->size());
        values = std::max(values, (seen * samples + like->size() - 1) / like->size());
      }
    }
    if (slot.type == SlotType::kInt64) {
      c.ids.reserve(values);
    } else {
      c.values.reserve(values);
    }
  }
}

void SampleBlock::AppendFrom(const SampleBlock& other, size_t row) {
  for (size_t i = 0; i < columns_.size(); ++i) {
    const SlotSpec& slot = (*slots_)[i];
    const SlotColumn& src = other.columns_[i];
    SlotColumn& dst = columns_[i];
    size_t begin = slot.dense ? row * slot.width : src.offsets[row];
    size_t end = slot.dense ? begin + slot.width : src.offsets[row + 1];
    if (slot.type == SlotType::kInt64) {
      dst.ids.insert(dst.ids.end(), src.ids.begin() + begin, src.ids.begin() + end);
      if (!slot.dense) dst.offsets.push_back(dst.ids.size());
    } else {
      dst.values.insert(dst.values.end(), src.values.begin() + begin, src.values.begin() + end);
      if (!slot.dense) dst.offsets.push_back(dst.values.size());
    }
  }
  ++size_;
}

size_t SampleBlock::ByteSize() const {
  size_t bytes = 0;
  for (const auto& c : columns_) {
    bytes += c.ids.size() * sizeof(int64_t) + c.values.size() * sizeof(float);
    bytes += c.offsets.size() * sizeof(uint64_t);
  }
  return bytes;
}

// Layout: u64 slot count, u64 samples, then per slot: u64 value count, the values, and for LoD
// slots the samples + 1 offsets. Host byte order: workers of one job share an architecture.
std::string SampleBlock::Serialize() const {
  std::string out;
  uint64_t header[2] = {columns_.size(), size_};
  AppendPod(&out, header, 2);
  for (size_t i = 0; i < columns_.size(); ++i) {
    const SlotSpec& slot = (*slots_)[i];
    const SlotColumn& c = columns_[i];
    uint64_t n = slot.type == SlotType::kInt64 ? c.ids.size() : c.values.size();
    AppendPod(&out, &n, 1);
    if (slot.type == SlotType::kInt64) {
      AppendPod(&out, c.ids.data(), n);
    } else {
      AppendPod(&out, c.values.data(), n);
    }
    if (!slot.dense) AppendPod(&out, c.offsets.data(), c.offsets.size());
  }
  return out;
}

void SampleBlock::AppendSerialized(std::string_view bytes) {
  if (bytes.empty()) return;
  size_t pos = 0;
  std::vector<uint64_t> header;
  ReadPod(bytes, &pos, 2, &header);
  FLEET_ENFORCE(header[0] == columns_.size(), InvalidArgument, "serialised sample block has ",
                header[0], " slots, this dataset uses ", columns_.size());
  const uint64_t samples = header[1];
  SampleBlock incoming(slots_);
  for (size_t i = 0; i < columns_.size(); ++i) {
    const SlotSpec& slot = (*slots_)[i];
    SlotColumn& c = incoming.columns_[i];
    std::vector<uint64_t> n;
    ReadPod(bytes, &pos, 1, &n);
    if (slot.type == SlotType::kInt64) {
      ReadPod(bytes, &pos, n[0], &c.ids);
    } else {
      ReadPod(bytes, &pos, n[0], &c.values);
    }
    if (slot.dense) {
      FLEET_ENFORCE(n[0] == samples * slot.width, InvalidArgument, "serialised slot '", slot.name,
                    "' has ", n[0], " values for ", samples, " samples of width ", slot.width);
    } else {
      c.offsets.clear();
      ReadPod(bytes, &pos, samples + 1, &c.offsets);
      FLEET_ENFORCE(c.offsets.front() == 0 && c.offsets.back() == n[0], InvalidArgument,
                    "serialised slot '", slot.name, "' has inconsistent offsets");
    }
  }
  FLEET_ENFORCE(pos == bytes.size(), InvalidArgument, "serialised sample block has ",
                bytes.size() - pos, " trailing bytes");
  incoming.size_ = samples;
  for (size_t row = 0; row < samples; ++row) AppendFrom(incoming, row);
}

Batch ToBatch(SampleBlock&& block) {
  Batch batch;
  batch.num_samples = static_cast<int64_t>(block.size());
  batch.tensors.resize(block.slots().size());
  for (size_t i = 0; i < block.slots().size(); ++i) {
    const SlotSpec& slot = block.slots()[i];
    SlotColumn& c = block.column(i);
    Shape shape = slot.shape;
    LoDTensor& t = batch.tensors[i];
    if (slot.dense) {
      shape[slot.batch_axis] = batch.num_samples;
    } else {
      shape[slot.batch_axis] = static_cast<int64_t>(c.offsets.back());
      t.set_lod({std::vector<size_t>(c.offsets.begin(), c.offsets.end())});
    }
    if (slot.type == SlotType::kInt64) {
      AdoptVector(std::move(c.ids), DType::kInt64, std::move(shape), &t);
    } else {
      AdoptVector(std::move(c.values), DType::kFloat32, std::move(shape), &t);
    }
  }
  return batch;
}

}  // namespace fleet::data
