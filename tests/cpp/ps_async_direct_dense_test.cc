// The async communicator's dense push without a hand-off (max_dense_staleness 0): a trainer
// thread whose dense queue is idle starts the push itself and its next step boundary waits for
// the reply (async_communicator.h). Through the real communicator and a real server on loopback,
// over the wire and through shared memory: every step must read exactly the values after all of
// its own earlier gradients, the pushes must have gone directly, a push left outstanding by a
// thread whose pass ended must be finished by the pass's end, and a sibling's gradient queued
// behind it must not wait for that thread. A direct push that fails (its server stopped) must be
// thrown by the next op that needs it, naming the dense push, and must not hang the destructor.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
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

// What the error of a failed direct push says (async_communicator.cc): the dense queue's push.
constexpr char kDensePushError[] =
    "push of the dense gradients and the refresh of the dense values";

// How long an op may take before it counts as hung: it needs milliseconds (a stopped server
// refuses the connection at once), so this only turns a hang into a failure.
constexpr std::chrono::seconds kHangDeadline(20);

// Runs `op` on a thread of its own and returns what it threw (null: nothing). A lost error would
// leave a step waiting for a refresh that never comes: past kHangDeadline the test fails and
// `release`, when given (a stop of the communicator, which wakes every wait), lets the op return.
// An op that not even that ends within another deadline aborts the binary (a join would hang).
std::exception_ptr RunWithDeadline(const std::string& what, const std::function<void()>& op,
                                   const std::function<void()>& release = {}) {
  std::exception_ptr thrown;
  std::promise<void> returned;
  std::future<void> done = returned.get_future();
  std::thread runner([&] {
    try {
      op();
    } catch (...) {
      thrown = std::current_exception();
    }
    returned.set_value();
  });
  if (done.wait_for(kHangDeadline) != std::future_status::ready) {
    ADD_FAILURE() << what << " did not return within " << kHangDeadline.count() << " s";
    // On a thread too: a release that hangs as well must not keep the abort below from coming.
    std::promise<void> release_returned;
    std::future<void> released = release_returned.get_future();
    std::thread releaser([&] {
      if (release) release();
      release_returned.set_value();
    });
    if (done.wait_for(kHangDeadline) != std::future_status::ready ||
        released.wait_for(kHangDeadline) != std::future_status::ready) {
      std::fprintf(stderr, "%s hangs, even after its release: aborting\n", what.c_str());
      std::abort();
    }
    releaser.join();
  }
  runner.join();
  return thrown;
}

// The message of `thrown`, which must be a std::exception ("" with a failure when none).
std::string MessageOf(const std::exception_ptr& thrown, const std::string& what) {
  if (thrown == nullptr) {
    ADD_FAILURE() << what << " threw nothing";
    return "";
  }
  try {
    std::rethrow_exception(thrown);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
  }
  ADD_FAILURE() << what << " threw something other than a std::exception";
  return "";
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

  // Stops the server: every later call to it fails (the connection is refused).
  void StopServer() { servers_.at(0)->Shutdown(absl::Seconds(1)); }

  // Thread 0's first step sends its gradient after the server stopped: the push goes directly
  // (the dense queue is idle) and its call fails, unseen until an op needs the push.
  void SendDirectlyToAStoppedServer() {
    hook_->BeforeStep(Step(0, 0));
    StopServer();
    communicator_->SendDense(0, {&grads_[0]});
    EXPECT_EQ(async_->direct_dense_pushes(), 1);
  }

  // Runs `op` with RunWithDeadline; past the deadline a stop of the communicator releases it.
  std::exception_ptr Run(const std::string& what, const std::function<void()>& op) {
    return RunWithDeadline(what, op, [this] {
      try {
        communicator_->Stop();
      } catch (const std::exception&) {  // its error is not what the test checks
      }
    });
  }

  // Stop() ends the job with the kept error, which must be the dense push's.
  void ExpectStopThrowsTheDensePushError() {
    const std::string message = MessageOf(Run("Stop", [this] { communicator_->Stop(); }), "Stop");
    EXPECT_NE(message.find(kDensePushError), std::string::npos) << message;
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

TEST_P(AsyncDirectDenseTest, TheNextStepThrowsTheErrorOfADirectPushToAStoppedServer) {
  BeginPass(1);
  SendDirectlyToAStoppedServer();
  hook_->AfterStep(Step(0, 0));
  // The step waits for that push (max_dense_staleness 0): it finishes it and throws its error.
  const std::string message =
      MessageOf(Run("BeforeStep", [this] { hook_->BeforeStep(Step(0, 1)); }), "BeforeStep");
  EXPECT_NE(message.find(kDensePushError), std::string::npos) << message;
  EndPass();
  ExpectStopThrowsTheDensePushError();
}

TEST_P(AsyncDirectDenseTest, ThePassEndThrowsTheErrorOfAnOutstandingDirectPush) {
  BeginPass(1);
  SendDirectlyToAStoppedServer();
  hook_->AfterStep(Step(0, 0));
  // No step follows: the pass's end (its flush) finishes the push and throws its error, not the
  // error of the refresh it would pull next.
  const std::string message = MessageOf(Run("the pass's end", [this] { EndPass(); }), "EndPass");
  EXPECT_NE(message.find(kDensePushError), std::string::npos) << message;
  ExpectStopThrowsTheDensePushError();
}

TEST_P(AsyncDirectDenseTest, ASiblingQueuedBehindAFailedDirectPushThrowsItsError) {
  BeginPass(2);
  SendDirectlyToAStoppedServer();  // thread 0 runs no more steps
  hook_->AfterStep(Step(0, 0));
  hook_->BeforeStep(Step(1, 0));
  // Queued behind thread 0's push, which nobody finished yet: the send thread (woken by this
  // item) or thread 1's next step finishes it, whichever comes first, and the step throws.
  const std::exception_ptr sent = Run("SendDense", [this] {
    communicator_->SendDense(1, {&grads_[1]});
    hook_->AfterStep(Step(1, 0));
    hook_->BeforeStep(Step(1, 1));
  });
  EXPECT_EQ(async_->direct_dense_pushes(), 1);
  const std::string message = MessageOf(sent, "thread 1's send and next step");
  EXPECT_NE(message.find(kDensePushError), std::string::npos) << message;
  EndPass();
  ExpectStopThrowsTheDensePushError();
}

TEST_P(AsyncDirectDenseTest, TheDestructorWaitsOutADirectPushToAStoppedServer) {
  BeginPass(1);
  SendDirectlyToAStoppedServer();
  // Destroyed without a Stop, its push not finished by anyone: the destructor must wait for the
  // call (which writes the communicator's buffer until it ends) and drop its error. A hang fails
  // here; an error thrown out of it, or the buffer freed under the call, would end the binary.
  hook_.reset();
  async_ = nullptr;
  RunWithDeadline("the destructor", [this] { communicator_.reset(); });
}

INSTANTIATE_TEST_SUITE_P(Transports, AsyncDirectDenseTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "SharedMemory" : "Wire";
                         });

}  // namespace
}  // namespace fleet::distributed
