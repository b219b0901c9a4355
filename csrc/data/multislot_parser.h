#pragma once
// The MultiSlot text format of Paddle's MultiSlotDataFeed: one sample per line; for each used
// slot, in order, a count n followed by n values, all separated by spaces or tabs.
//
//   "3 11 12 13 1 0.5 1 1"  with slots (ids: LoD int64, w: dense float32 [-1, 1],
//                                        label: dense int64 [-1, 1])
//   -> ids = {11, 12, 13}, w = {0.5}, label = {1}
//
// Rules (each violation is an InvalidArgument "<file>:<line>: slot '<name>' (#k of n): ..."):
// - the count is a decimal integer; a dense slot's count must equal its width; a LoD slot's
//   count must be at least 1 (Paddle's rule: pad empty slots in the data generator);
// - int64 slots take decimal integers with an optional sign, within the int64 range; float32
//   slots take decimal or scientific numbers (nan and inf included) within the float32 range;
// - the line must hold every slot, and nothing after the last one.
// A line of only whitespace holds no sample and is skipped (it is not an error). A trailing
// '\r' (CRLF files) is whitespace.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/slots.h"

namespace fleet::data {

class MultiSlotParser {
 public:
  // `slots` must outlive the parser.
  explicit MultiSlotParser(const std::vector<SlotSpec>* slots);

  // Parses `line` (without its '\n') and appends its sample to `block`. Returns false, adding
  // nothing, for a blank line. On a malformed line throws InvalidArgument naming `file`,
  // `line_number` (1-based) and the slot, and leaves `block` as it was. Thread-compatible: one
  // parser may serve many threads, each with its own block.
  bool Parse(std::string_view line, const std::string& file, int64_t line_number,
             SampleBlock* block) const;

 private:
  // What the fast path needs of a slot: one kind to switch on (and the width of a dense one). Read
  // from SlotSpec, its dense flag, type and int64 width were loaded again after each value the
  // loop stored (an int64 store may alias the width), and its name and shape spread the specs
  // over many cache lines.
  enum class FastKind : uint8_t { kLodIds, kLodValues, kDenseIds, kDenseValues };
  struct FastSlot {
    FastKind kind;
    uint64_t width;  // dense slots: values per sample
  };
  class FastLine;

  const std::vector<SlotSpec>* slots_;
  std::vector<FastSlot> plan_;
};

}  // namespace fleet::data
