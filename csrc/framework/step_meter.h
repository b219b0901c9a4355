#pragma once
// StepMeter: a step hook (runtime.h) that counts what a process trains, for live metrics
// (fleet/monitoring reads Snapshot() when Prometheus scrapes): steps, samples, and a histogram
// of step times. Registered on the RuntimeResources of the executors to watch, beside the
// engines' hooks; it changes nothing in a step.
//
// Step time is from this hook's BeforeStep to its AfterStep on the thread that ran the batch:
// the batch's kernels, including the pulls and pushes its ops wait for. Hooks run in
// registration order, so an engine's hook registered after this one (a sync barrier in
// AfterStep) falls outside it; the samples counter over time gives the end-to-end rate.
//
// Samples of a step: the batch size of the first of `sample_vars` found in the step's scope
// (its sequences when it has a LoD, else its first dimension); none found, or no names given:
// the step counts no samples (steps are still counted).
//
// Thread safety: the hook methods follow runtime.h's contract (each thread touches only its own
// slot; OnPassBegin runs before the threads); Snapshot may run on any thread at any time.

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "framework/runtime.h"

namespace fleet::framework {

// Upper bounds of the step time buckets, in seconds (a last bucket, +Inf, catches the rest).
inline constexpr std::array<double, 14> kStepTimeBounds = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0};

struct StepMeterSnapshot {
  int64_t steps = 0;
  int64_t samples = 0;
  double step_seconds_sum = 0;
  std::vector<double> step_time_bounds;  // kStepTimeBounds
  // Steps per bucket (not cumulative); the last one those above every bound.
  std::vector<uint64_t> step_time_buckets;
};

class StepMeter : public StepHook {
 public:
  explicit StepMeter(std::vector<std::string> sample_vars = {});

  // Replaces the variables samples are counted from; between runs only (runtime.h).
  void SetSampleVars(std::vector<std::string> sample_vars);
  StepMeterSnapshot Snapshot() const;

  void OnPassBegin(const PassInfo& pass) override;
  void BeforeStep(const StepInfo& info) override;
  void AfterStep(const StepInfo& info) override;
  std::string Name() const override { return "StepMeter"; }

 private:
  int64_t SamplesIn(const Scope* scope) const;

  std::vector<std::string> sample_vars_;
  std::vector<absl::Time> step_start_;  // per trainer thread of the pass
  std::atomic<int64_t> steps_{0};
  std::atomic<int64_t> samples_{0};
  std::atomic<uint64_t> step_nanos_{0};
  std::array<std::atomic<uint64_t>, kStepTimeBounds.size() + 1> buckets_{};
};

}  // namespace fleet::framework
