#pragma once
// Values of new sparse rows and of dense tables at start.

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "fleet/ps/ps.pb.h"

namespace fleet::ps {

// Element j of row `key` is a pure function of (seed, key, j): a counter-based generator, so the
// value of a row does not depend on which server creates it, on the number of servers or on the
// order of pulls. Stateless, so thread-safe.
class Initializer {
 public:
  // InvalidArgument when the bounds are empty or the deviation is negative.
  static absl::StatusOr<Initializer> Create(const proto::InitializerConfig& config);

  // Writes elements [first, first + n) of row `key` to out[0, n).
  void Fill(int64_t key, uint64_t first, size_t n, float* out) const;

 private:
  enum class Kind { kZero, kConstant, kUniform, kGaussian, kTruncatedGaussian };
  Initializer(Kind kind, float a, float b, uint64_t seed)
      : kind_(kind), a_(a), b_(b), seed_(seed) {}

  Kind kind_;
  float a_;  // low, mean or the constant
  float b_;  // high or std
  uint64_t seed_;
};

}  // namespace fleet::ps
