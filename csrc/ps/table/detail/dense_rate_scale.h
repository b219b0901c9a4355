#pragma once
// Per-parameter learning rates of a dense table (TableConfig.rate_scales: a parameter's
// ParamAttr(learning_rate=k) in a job whose servers update the dense parameters). The table's
// update rule runs at its own rate; the elements of a scaled range then keep k times the change
// the rule made: w = w_old + k * (w_rule - w_old). That is the rule at k times its rate for SGD,
// Adagrad and Adam, whose change of w is proportional to the rate and whose state (accumulators,
// moments, beta powers) does not depend on it, so the rules themselves know nothing of scales.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace fleet::ps::detail {

// Elements [offset, offset + size) of the whole table, at `scale` times the rule's rate.
struct RateRange {
  uint64_t offset;
  uint64_t size;
  float scale;
};

// A range's part within one block: `length` elements from `begin` (block-relative).
struct RateSpan {
  size_t begin;
  size_t length;
  float scale;
};

// Sorts `ranges` by offset. InvalidArgument naming the table (`name`) and the range for a size of
// 0, a range past `dim`, two ranges that overlap, or a scale that is not finite and >= 0.
absl::Status CheckRateRanges(std::vector<RateRange>* ranges, uint64_t dim, const std::string& name);

// The spans of the block of `length` elements from table element `begin` that the sorted,
// checked `ranges` cover (empty for a block no range reaches), ranges of scale 1 left out.
std::vector<RateSpan> SpansOfBlock(const std::vector<RateRange>& ranges, uint64_t begin,
                                   size_t length);

// Whether a span scales its change up (> 1): the rule's proof that its update stays in range
// (UpdateRule::UpdateStaysWithin) is for its own rate only.
bool AnySpanAbove1(const std::vector<RateSpan>& spans);

// One push's scaling of the spans of a block: Keep before the rule updates the block's values
// `w`, Apply after. Holds the kept values; one per push (not thread-safe), reused block by block.
class SpanScaler {
 public:
  void Keep(const std::vector<RateSpan>& spans, const float* w);
  void Apply(const std::vector<RateSpan>& spans, float* w) const;

 private:
  std::vector<float> kept_;
};

}  // namespace fleet::ps::detail
