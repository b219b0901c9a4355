#include "distributed/even_steps.h"

#include "absl/strings/str_cat.h"

namespace fleet::distributed {

EvenStepsHook::EvenStepsHook(std::shared_ptr<CollectiveGroup> group,
                             std::function<void(std::string)> log)
    : group_(std::move(group)), log_(std::move(log)) {}

void EvenStepsHook::OnPassBegin(const framework::PassInfo& pass) {
  dataset_pass_ = pass.dataset_pass;
  over_ = false;
  steps_ = 0;
}

int EvenStepsHook::Agree(int has_batch, const std::string& what) {
  int32_t flag = has_batch;
  const collective::AllReduceOptions options{collective::ReduceOp::kSum, group_->timeout(), {}};
  group_->Run(what, [&flag, &options](collective::CollectiveBackend& backend) {
    backend.AllReduce(&flag, &flag, 1, DType::kInt32, options);
  });
  return flag;
}

bool EvenStepsHook::AdmitStep(const framework::StepInfo& info) {
  if (!dataset_pass_) return true;
  if (over_) return false;
  const int ready = Agree(1, absl::StrCat("even-steps check before step ", steps_));
  if (ready < group_->size()) {
    over_ = true;
    if (log_) {
      log_(absl::StrCat("rank ", group_->rank(), " of group '", group_->name(),
                        "': ", group_->size() - ready, " of ", group_->size(),
                        " ranks ran out of data after ", steps_,
                        " steps; this rank ends the pass there too (its remaining batches are "
                        "not used), so that every rank ran the same steps"));
    }
    return false;
  }
  ++steps_;
  return true;
}

void EvenStepsHook::OnThreadEnd(int thread) {
  if (!dataset_pass_ || over_) return;
  // This rank ran out of data: tell the others, who are waiting in their next check.
  over_ = true;
  Agree(0, absl::StrCat("even-steps check after the last step (", steps_, ")"));
}

}  // namespace fleet::distributed
