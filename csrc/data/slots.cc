#include "data/slots.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>

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

// Consecutive rows of one block among the rows AppendRows gathers: `count` rows from `first`.
// A pass over unshuffled memory gathers a batch as one run (or two, across a block boundary),
// which each column then copies in one piece.
struct RowRun {
  const SampleBlock* block;
  size_t first;
  size_t count;
};

std::vector<RowRun> RunsOf(const std::vector<SampleRow>& rows) {
  std::vector<RowRun> runs;
  for (const SampleRow& r : rows) {
    if (!runs.empty() && runs.back().block == r.block &&
        runs.back().first + runs.back().count == r.row) {
      ++runs.back().count;
    } else {
      runs.push_back({r.block, r.row, 1});
    }
  }
  return runs;
}

// Copies n values; a run of a shuffled pass is mostly one value, for which a call to memcpy
// costs more than the copy.
template <typename T>
T* CopyValues(const T* from, size_t n, T* to) {
  if (n <= 4) {
    for (size_t j = 0; j < n; ++j) to[j] = from[j];
    return to + n;
  }
  std::memcpy(to, from, n * sizeof(T));
  return to + n;
}

// AppendRows for one column whose values are `member` (ids or values) of type T. Each column
// is resized once to its exact length (offsets first, for LoD slots) and filled by plain stores.
template <typename T>
void GatherColumn(const SlotSpec& slot, size_t slot_index, const std::vector<RowRun>& runs,
                  size_t samples, std::vector<T> SlotColumn::*member, SlotColumn* dst) {
  std::vector<T>& out = dst->*member;
  const size_t old = out.size();
  if (slot.dense) {
    const size_t width = static_cast<size_t>(slot.width);
    out.resize(old + samples * width);
    T* to = out.data() + old;
    for (const RowRun& run : runs) {
      const T* from = (run.block->column(slot_index).*member).data() + run.first * width;
      to = CopyValues(from, run.count * width, to);
    }
    return;
  }
  std::vector<uint64_t>& offsets = dst->offsets;
  const size_t first = offsets.size();
  offsets.resize(first + samples);
  uint64_t* offset = offsets.data() + first;
  uint64_t end = offset[-1];
  for (const RowRun& run : runs) {
    const uint64_t* src = run.block->column(slot_index).offsets.data() + run.first;
    const uint64_t base = src[0];
    for (size_t k = 1; k <= run.count; ++k) *offset++ = end + (src[k] - base);
    end += src[run.count] - base;
  }
  out.resize(static_cast<size_t>(end));
  T* to = out.data() + old;
  for (const RowRun& run : runs) {
    const SlotColumn& src = run.block->column(slot_index);
    const uint64_t begin = src.offsets[run.first];
    to = CopyValues((src.*member).data() + begin,
                    static_cast<size_t>(src.offsets[run.first + run.count] - begin), to);
  }
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

void SampleBlock::AppendRows(const std::vector<SampleRow>& rows) {
  const std::vector<RowRun> runs = RunsOf(rows);
  for (size_t i = 0; i < columns_.size(); ++i) {
    const SlotSpec& slot = (*slots_)[i];
    if (slot.type == SlotType::kInt64) {
      GatherColumn(slot, i, runs, rows.size(), &SlotColumn::ids, &columns_[i]);
    } else {
      GatherColumn(slot, i, runs, rows.size(), &SlotColumn::values, &columns_[i]);
    }
  }
  size_ += rows.size();
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
      // The offsets become the LoD: moved where size_t is uint64_t (LP64), else copied.
      if constexpr (std::is_same_v<size_t, uint64_t>) {
        t.set_lod({std::move(c.offsets)});
      } else {
        t.set_lod({std::vector<size_t>(c.offsets.begin(), c.offsets.end())});
      }
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
