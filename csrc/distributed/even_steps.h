#pragma once
// EvenStepsHook: makes the ranks of a collective job run the same number of steps in a dataset
// pass when their data differ in size. Without it, the rank with more batches would enter an
// all-reduce that no other rank joins and wait for the whole collective timeout.
//
// The rule (as with torch's Join, but ending rather than padding): before each step every rank
// all-reduces "I have a batch" (1) through the group; a rank out of data contributes 0 once, when
// its trainer thread ends. When the sum is short of the group size, every rank ends the pass
// there: they all ran the same steps, the longer ranks' remaining batches are not used (logged
// with the counts), and the parameters stay equal on every rank. The cost is one all-reduce of
// one int per step. Executor.run loops are the caller's to keep even (each run is its own pass).
//
// One trainer thread per rank (OneThreadPerRankHook), so the hook needs no lock of its own.

#include <functional>
#include <memory>
#include <string>

#include "distributed/collective_group.h"
#include "framework/runtime.h"

namespace fleet::distributed {

class EvenStepsHook : public framework::StepHook {
 public:
  // `log` receives the message of a pass that ended early on this rank.
  EvenStepsHook(std::shared_ptr<CollectiveGroup> group, std::function<void(std::string)> log);

  void OnPassBegin(const framework::PassInfo& pass) override;
  bool AdmitStep(const framework::StepInfo& info) override;
  void OnThreadEnd(int thread) override;
  std::string Name() const override { return "collective even-steps check"; }

 private:
  // Sum over the ranks of `has_batch`.
  int Agree(int has_batch, const std::string& what);

  std::shared_ptr<CollectiveGroup> group_;
  std::function<void(std::string)> log_;
  bool dataset_pass_ = false;
  bool over_ = false;  // the ranks agreed that this pass is over
  int64_t steps_ = 0;
};

}  // namespace fleet::distributed
