// The async communicator's dense push without a hand-off (max_dense_staleness 0): a trainer
// thread whose dense queue is idle starts the push itself and its next step boundary waits for
// the reply (async_communicator.h). Through the real communicator and a real server on loopback,
// over the wire and through shared memory: every step must read exactly the values after all of
// its own earlier gradients, the pushes must have gone directly, a push left outstanding by a
// thread whose pass ended must be finished by the pass's end, and a sibling's gradient queued
// behind it must not wait for that thread.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "async_dense_loopback.h"
#include "core/lod_tensor.h"
#include "core/scope.h"
#include "distributed/communicator.h"
#include "distributed/detail/async_communicator.h"
#include "ps/client/client.h"
#include "ps/server/server.h"

namespace fleet::distributed {
namespace {

constexpr uint32_t kDense = 5;
constexpr uint64_t kDim = 10;
constexpr float kRate = 0.5f;
constexpr float kStart = 100.0f;
constexpr int kSteps = 20;

// Thread t's gradient, the same every step: small integers, so that every state is exact.
float Grad(int thread, uint64_t i) { return static_cast<float>((i + thread) % 3 + 1); }

// The value of element i once the server applied `pushes[t]` gradients of thread t (SGD).
float Expected(const std::vector<int>& pushes, uint64_t i) {
  float sum = 0.0f;
  for (size_t t = 0; t < pushes.size(); ++t) {
    sum += static_cast<float>(pushes[t]) * Grad(static_cast<int>(t), i);
  }
  return kStart - kRate * sum;
}

class AsyncDirectDenseTest : public testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    testing_async::StartAsyncSgdDense({kDense, kDim, kRate, kStart, /*shared_memory=*/GetParam()},
                                      &root_, &servers_, &communicator_);
    if (HasFatalFailure()) return;
    hook_ = communicator_->hooks().at(0);
    async_ = dynamic_cast<detail::AsyncCommunicator*>(communicator_.get());
    ASSERT_NE(async_, nullptr);
  }

  void TearDown() override {
    if (communicator_ != nullptr) communicator_->Stop();
  }

  // A dataset pass of `threads` threads, each in a scope of its own with its copy of w.
  void BeginPass(int threads) {
    pass_scope_ = root_.NewScope();
    for (int t = 0; t < threads; ++t) {
      scopes_.push_back(pass_scope_->NewScope());
      hook_->PrepareThreadScope(t, scopes_.back());
    }
    framework::PassInfo pass(threads, /*dataset=*/true);
    pass.written_vars = std::vector<std::string>{"w@GRAD"};
    hook_->OnPassBegin(pass);
    for (int t = 0; t < threads; ++t) {
      LoDTensor& grad = grads_.emplace_back();
      grad.Resize({static_cast<int64_t>(kDim)});
      float* g = grad.mutable_data<float>();
      for (uint64_t i = 0; i < kDim; ++i) g[i] = Grad(t, i);
    }
  }

  void EndPass() {
    for (size_t t = 0; t < scopes_.size(); ++t) hook_->OnThreadEnd(static_cast<int>(t));
    hook_->OnPassEnd();
    pass_scope_->DropKids();
  }

  framework::StepInfo Step(int thread, int64_t step) const {
    return framework::StepInfo{thread, static_cast<int>(scopes_.size()), step, scopes_[thread]};
  }

  // Whether the values thread t reads are those after `pushes` (one count per thread).
  void ExpectReads(int t, const std::vector<int>& pushes, const std::string& when) const {
    const float* w = scopes_[t]->FindVar("w")->Get<LoDTensor>().data<float>();
    for (uint64_t i = 0; i < kDim; ++i) {
      ASSERT_EQ(w[i], Expected(pushes, i)) << "thread " << t << " " << when << ", element " << i;
    }
  }

  // The server's values and the root scope's (which the pass's end brings up to date).
  void ExpectServerAndRootHold(const std::vector<int>& pushes) {
    std::vector<float> dense(kDim);
    ASSERT_TRUE(communicator_->client().PullDense(kDense, absl::MakeSpan(dense)).Wait().ok());
    const float* root = root_.FindVar("w")->Get<LoDTensor>().data<float>();
    for (uint64_t i = 0; i < kDim; ++i) {
      EXPECT_EQ(dense[i], Expected(pushes, i)) << "the server's element " << i;
      EXPECT_EQ(root[i], Expected(pushes, i)) << "the root scope's element " << i;
    }
  }

  std::vector<std::unique_ptr<ps::PsServer>> servers_;
  Scope root_;
  Scope* pass_scope_ = nullptr;
  std::vector<Scope*> scopes_;
  std::vector<LoDTensor> grads_;
  std::shared_ptr<Communicator> communicator_;
  std::shared_ptr<framework::StepHook> hook_;
  detail::AsyncCommunicator* async_ = nullptr;
};

TEST_P(AsyncDirectDenseTest, EveryStepReadsAllItsOwnGradientsPushedWithoutTheSendThread) {
  BeginPass(1);
  for (int step = 0; step < kSteps; ++step) {
    hook_->BeforeStep(Step(0, step));
    // One worker of one thread: the values hold exactly its `step` gradients so far.
    ExpectReads(0, {step}, "at step " + std::to_string(step));
    if (HasFatalFailure()) return;
    communicator_->SendDense(0, {&grads_[0]});
    hook_->AfterStep(Step(0, step));
  }
  // The dense queue was idle at every send: each push went from the trainer thread.
  EXPECT_EQ(async_->direct_dense_pushes(), kSteps);
  // The last push is still outstanding (no step boundary after it): the pass's end finishes it.
  EndPass();
  ExpectServerAndRootHold({kSteps});
}

TEST_P(AsyncDirectDenseTest, AGradientQueuedBehindAnEndedThreadsPushDoesNotWaitForIt) {
  BeginPass(2);
  hook_->BeforeStep(Step(0, 0));
  communicator_->SendDense(0, {&grads_[0]});  // direct: the queue is idle
  hook_->AfterStep(Step(0, 0));
  // Thread 0 runs no more steps; its push is outstanding when thread 1 sends.
  hook_->BeforeStep(Step(1, 0));
  ExpectReads(1, {0, 0}, "at its first step");
  communicator_->SendDense(1, {&grads_[1]});  // queued behind thread 0's push
  hook_->AfterStep(Step(1, 0));
  EXPECT_EQ(async_->direct_dense_pushes(), 1);
  // Its next step must read its own gradient, which the server applied after thread 0's.
  hook_->BeforeStep(Step(1, 1));
  ExpectReads(1, {1, 1}, "at its second step");
  hook_->AfterStep(Step(1, 1));
  EndPass();
  ExpectServerAndRootHold({1, 1});
}

INSTANTIATE_TEST_SUITE_P(Transports, AsyncDirectDenseTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "SharedMemory" : "Wire";
                         });

}  // namespace
}  // namespace fleet::distributed
