#include "ps/table/detail/dense_rate_scale.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace fleet::ps::detail {
namespace {

std::string Describe(const RateRange& r) {
  return absl::StrCat("rate_scales range [", r.offset, ", ", r.offset + r.size, ") at scale ",
                      r.scale);
}

}  // namespace

absl::Status CheckRateRanges(std::vector<RateRange>* ranges, uint64_t dim,
                             const std::string& name) {
  std::sort(ranges->begin(), ranges->end(),
            [](const RateRange& a, const RateRange& b) { return a.offset < b.offset; });
  for (size_t i = 0; i < ranges->size(); ++i) {
    const RateRange& r = (*ranges)[i];
    if (r.size == 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", Describe(r), " is empty"));
    }
    if (r.offset >= dim || r.size > dim - r.offset) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": ", Describe(r), " ends past the table's dim ", dim));
    }
    if (!(r.scale >= 0.0f) || !std::isfinite(r.scale)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": ", Describe(r), ": the scale must be finite and >= 0"));
    }
    if (i > 0 && (*ranges)[i - 1].offset + (*ranges)[i - 1].size > r.offset) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": ", Describe((*ranges)[i - 1]), " overlaps ", Describe(r)));
    }
  }
  return absl::OkStatus();
}

std::vector<RateSpan> SpansOfBlock(const std::vector<RateRange>& ranges, uint64_t begin,
                                   size_t length) {
  std::vector<RateSpan> spans;
  const uint64_t end = begin + length;
  for (const RateRange& r : ranges) {
    if (r.offset >= end) break;
    const uint64_t from = std::max(begin, r.offset);
    const uint64_t to = std::min(end, r.offset + r.size);
    if (from >= to || r.scale == 1.0f) continue;
    spans.push_back({static_cast<size_t>(from - begin), static_cast<size_t>(to - from), r.scale});
  }
  return spans;
}

bool AnySpanAbove1(const std::vector<RateSpan>& spans) {
  return std::any_of(spans.begin(), spans.end(), [](const RateSpan& s) { return s.scale > 1.0f; });
}

void SpanScaler::Keep(const std::vector<RateSpan>& spans, const float* w) {
  kept_.clear();
  for (const RateSpan& s : spans) kept_.insert(kept_.end(), w + s.begin, w + s.begin + s.length);
}

void SpanScaler::Apply(const std::vector<RateSpan>& spans, float* w) const {
  const float* old = kept_.data();
  for (const RateSpan& s : spans) {
    float* v = w + s.begin;
    for (size_t i = 0; i < s.length; ++i) v[i] = old[i] + s.scale * (v[i] - old[i]);
    old += s.length;
  }
}

}  // namespace fleet::ps::detail
