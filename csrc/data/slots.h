#pragma once
// The data a dataset feeds: slot descriptions (one per used variable), parsed samples in columnar
// blocks, and batches of LoDTensors ready to be set into a trainer thread's scope.
//
// A slot is either dense (lod_level 0: exactly `width` values per sample, a [N, ...] tensor) or
// a LoD slot (lod_level 1: any positive number of values per sample, a [total, 1] tensor with
// lod [[0, n0, n0 + n1, ...]]), holding int64 ids or float32 values, as Paddle's MultiSlot
// DataFeed does.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/lod_tensor.h"

namespace fleet::data {

enum class SlotType { kInt64, kFloat32 };

struct SlotSpec {
  std::string name;
  SlotType type = SlotType::kInt64;
  bool dense = false;
  // The variable's declared shape; its one -1 dimension stands for the batch (dense slots) or
  // for the total number of values (LoD slots).
  Shape shape;
  // Values per sample for dense slots; 1 (values per row) for LoD slots.
  int64_t width = 1;
  int64_t batch_axis = 0;
};

// Validates and completes a slot description from a variable's declaration. Throws
// InvalidArgument naming the slot for a dtype other than int64/float32, a lod_level above 1, or
// a shape without exactly one -1 dimension (LoD slots: whose other dimensions are not all 1).
SlotSpec MakeSlotSpec(const std::string& name, DType dtype, int lod_level, const Shape& shape);

// Values of one slot for the samples of a block. Exactly one of ids/values is used (by type).
// LoD slots keep `offsets` (size samples + 1); dense slots have width * samples values and no
// offsets.
struct SlotColumn {
  std::vector<int64_t> ids;
  std::vector<float> values;
  std::vector<uint64_t> offsets{0};
};

class SampleBlock;

// Where a gathered sample comes from: row `row` of `block`.
struct SampleRow {
  const SampleBlock* block;
  size_t row;
};

// Consecutive parsed samples in columnar form: cheap to append to, to gather from, and to turn
// into batch tensors without per-sample allocations. Not thread-safe.
class SampleBlock {
 public:
  explicit SampleBlock(const std::vector<SlotSpec>* slots);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::vector<SlotSpec>& slots() const { return *slots_; }
  SlotColumn& column(size_t slot) { return columns_[slot]; }
  // The columns in slot order, one after another (size: slots().size()).
  SlotColumn* columns() { return columns_.data(); }
  const SlotColumn& column(size_t slot) const { return columns_[slot]; }

  // Marks the values appended to every column since the last commit as one more sample. The
  // parser appends slot by slot and commits once the whole line is valid.
  void CommitSample() { ++size_; }
  // Drops values appended since the last commit (a malformed line).
  void Rollback();
  // Reserves room for `samples` samples so that the parser appends without reallocating (each
  // growth step copies the column and, for large blocks, maps fresh pages: that is what limits
  // parsing, more than the parsing itself). Dense slots get exactly their width per sample;
  // LoD slots as many values per sample as `like` held on average, at least one.
  void Reserve(size_t samples, const SampleBlock* like = nullptr);
  // Appends sample `row` of `other`, which must describe the same slots.
  void AppendFrom(const SampleBlock& other, size_t row);
  // Appends the samples `rows` names, in order (their blocks must describe the same slots): the
  // same result as AppendFrom for each, but built slot by slot, each column grown once to its
  // exact length, consecutive rows of a block copied in one piece. This is how a batch is
  // gathered from memory every step; AppendFrom's per-sample growth checks and copy calls cost
  // several times more per sample on one-id slots (CTR-DNN's 26).
  void AppendRows(const std::vector<SampleRow>& rows);
  // Bytes of sample data held (for memory accounting).
  size_t ByteSize() const;

  // A compact binary form, for exchanging samples between workers (global shuffle).
  std::string Serialize() const;
  // Appends the samples of Serialize()'s output; throws InvalidArgument if `bytes` is not a block
  // of the same slots.
  void AppendSerialized(std::string_view bytes);

 private:
  const std::vector<SlotSpec>* slots_;
  std::vector<SlotColumn> columns_;
  size_t size_ = 0;
};

// A batch of samples as tensors, one per slot in SlotSpec order.
struct Batch {
  int64_t num_samples = 0;
  std::vector<LoDTensor> tensors;
};

// Moves the block's columns into tensors (no copy of the values).
Batch ToBatch(SampleBlock&& block);

}  // namespace fleet::data
