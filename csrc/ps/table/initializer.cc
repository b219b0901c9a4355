#include "ps/table/initializer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "ps/sharding.h"

namespace fleet::ps {
namespace {

// A uniform float in [0, 1) from the top 24 bits of a mixed counter.
float Uniform01(uint64_t counter) {
  return static_cast<float>(Mix64(counter) >> 40) * (1.0f / 16777216.0f);
}

// A standard normal within [-2, 2]: Box-Muller draws from counters Mix64(c), Mix64(c) + 2, ...
// until one falls inside (95% of first draws do), so the value is still a pure function of c.
float TruncatedNormal(uint64_t c) {
  const uint64_t start = Mix64(c);
  for (uint64_t attempt = 0;; ++attempt) {
    const float u1 = 1.0f - Uniform01(start + 2 * attempt);  // in (0, 1] for the log
    const float u2 = Uniform01(start + 2 * attempt + 1);
    const float z = std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
    if (std::abs(z) <= 2.0f) return z;
  }
}

}  // namespace

absl::StatusOr<Initializer> Initializer::Create(const proto::InitializerConfig& config) {
  switch (config.kind_case()) {
    case proto::InitializerConfig::kUniform: {
      const auto& u = config.uniform();
      if (!(u.low() < u.high())) {
        return absl::InvalidArgumentError(absl::StrCat("uniform initializer: low (", u.low(),
                                                       ") must be below high (", u.high(), ")"));
      }
      return Initializer(Kind::kUniform, u.low(), u.high(), config.seed());
    }
    case proto::InitializerConfig::kGaussian: {
      const auto& g = config.gaussian();
      if (!(g.std() >= 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("gaussian initializer: std must be >= 0, got ", g.std()));
      }
      return Initializer(Kind::kGaussian, g.mean(), g.std(), config.seed());
    }
    case proto::InitializerConfig::kTruncatedGaussian: {
      const auto& g = config.truncated_gaussian();
      if (!(g.std() >= 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("truncated gaussian initializer: std must be >= 0, got ", g.std()));
      }
      return Initializer(Kind::kTruncatedGaussian, g.mean(), g.std(), config.seed());
    }
    case proto::InitializerConfig::kConstant:
      return Initializer(Kind::kConstant, config.constant().value(), 0, config.seed());
    case proto::InitializerConfig::kZero:
    case proto::InitializerConfig::KIND_NOT_SET:
      return Initializer(Kind::kZero, 0, 0, config.seed());
  }
  return absl::InvalidArgumentError("initializer: unknown kind");
}

void Initializer::Fill(int64_t key, uint64_t first, size_t n, float* out) const {
  const uint64_t base = Mix64(seed_ ^ Mix64(static_cast<uint64_t>(key)));
  switch (kind_) {
    case Kind::kZero:
      for (size_t i = 0; i < n; ++i) out[i] = 0.0f;
      return;
    case Kind::kUniform:
      for (size_t i = 0; i < n; ++i) out[i] = a_ + (b_ - a_) * Uniform01(base + first + i);
      return;
    case Kind::kConstant:
      for (size_t i = 0; i < n; ++i) out[i] = a_;
      return;
    case Kind::kGaussian:
      // Box-Muller on two uniforms per element; 1 - u keeps the log argument in (0, 1].
      for (size_t i = 0; i < n; ++i) {
        const uint64_t c = base + 2 * (first + i);
        const float u1 = 1.0f - Uniform01(c);
        const float u2 = Uniform01(c + 1);
        out[i] = a_ + b_ * std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
      }
      return;
    case Kind::kTruncatedGaussian:
      for (size_t i = 0; i < n; ++i) out[i] = a_ + b_ * TruncatedNormal(base + first + i);
      return;
  }
}

}  // namespace fleet::ps
