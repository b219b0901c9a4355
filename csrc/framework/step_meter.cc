#include "framework/step_meter.h"

#include <algorithm>

#include "core/variable.h"

namespace fleet::framework {

StepMeter::StepMeter(std::vector<std::string> sample_vars)
    : sample_vars_(std::move(sample_vars)), step_start_(1) {}

void StepMeter::SetSampleVars(std::vector<std::string> sample_vars) {
  sample_vars_ = std::move(sample_vars);
}

void StepMeter::OnPassBegin(const PassInfo& pass) {
  step_start_.assign(std::max(pass.num_threads, 1), absl::Time());
}

void StepMeter::BeforeStep(const StepInfo& info) {
  if (info.thread >= 0 && static_cast<size_t>(info.thread) < step_start_.size()) {
    step_start_[info.thread] = absl::Now();
  }
}

void StepMeter::AfterStep(const StepInfo& info) {
  constexpr auto relaxed = std::memory_order_relaxed;
  steps_.fetch_add(1, relaxed);
  samples_.fetch_add(SamplesIn(info.scope), relaxed);
  if (info.thread < 0 || static_cast<size_t>(info.thread) >= step_start_.size()) return;
  const absl::Time start = step_start_[info.thread];
  if (start == absl::Time()) return;  // no BeforeStep seen on this thread
  // A wall clock stepped back during the step reads as zero.
  const double seconds = std::max(0.0, absl::ToDoubleSeconds(absl::Now() - start));
  step_nanos_.fetch_add(static_cast<uint64_t>(seconds * 1e9), relaxed);
  const size_t bucket = std::lower_bound(kStepTimeBounds.begin(), kStepTimeBounds.end(), seconds) -
                        kStepTimeBounds.begin();
  buckets_[bucket].fetch_add(1, relaxed);
}

int64_t StepMeter::SamplesIn(const Scope* scope) const {
  if (scope == nullptr) return 0;
  for (const auto& name : sample_vars_) {
    const Variable* var = scope->FindVar(name);
    if (var == nullptr || !var->IsType<LoDTensor>()) continue;
    const LoDTensor& tensor = var->Get<LoDTensor>();
    if (!tensor.lod().empty() && !tensor.lod()[0].empty()) {
      return static_cast<int64_t>(tensor.lod()[0].size()) - 1;
    }
    if (!tensor.shape().empty()) return tensor.shape()[0];
  }
  return 0;
}

StepMeterSnapshot StepMeter::Snapshot() const {
  constexpr auto relaxed = std::memory_order_relaxed;
  StepMeterSnapshot snapshot;
  snapshot.steps = steps_.load(relaxed);
  snapshot.samples = samples_.load(relaxed);
  snapshot.step_seconds_sum = step_nanos_.load(relaxed) * 1e-9;
  snapshot.step_time_bounds.assign(kStepTimeBounds.begin(), kStepTimeBounds.end());
  for (const auto& bucket : buckets_) snapshot.step_time_buckets.push_back(bucket.load(relaxed));
  return snapshot;
}

}  // namespace fleet::framework
