// An async dataset pass of two trainer threads, through the real communicator and a real server
// on loopback. When no op of the pass's program writes a dense parameter (PassInfo's
// written_vars), the threads' dense parameters become views of the staged values, shared by
// both, instead of copies; when one may (it is listed, or the list is unknown) each thread keeps
// its own copy. Either way every step must read one whole state of the server's table that holds
// all of the thread's own earlier gradients (max_dense_staleness 0), and read it unchanged until
// the step ends: a buffer a thread views is never pulled into again.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "async_dense_loopback.h"
#include "core/lod_tensor.h"
#include "core/scope.h"
#include "distributed/communicator.h"
#include "ps/client/client.h"
#include "ps/server/server.h"

namespace fleet::distributed {
namespace {

constexpr uint32_t kDense = 3;
constexpr uint64_t kDim = 12;
constexpr float kRate = 0.5f;
constexpr float kStart = 100.0f;
constexpr int kThreads = 2;
constexpr int kSteps = 30;

// Thread t's gradient, the same every step. Element 0 counts thread 0's pushes alone and element
// 1 thread 1's, so a state of the table names how many of each it holds; small integers times
// kRate keep every state exact in float whatever the order of the pushes.
float Grad(int thread, uint64_t i) {
  if (i == 0) return thread == 0 ? 1.0f : 0.0f;
  if (i == 1) return thread == 1 ? 1.0f : 0.0f;
  return static_cast<float>(thread == 0 ? i % 3 + 1 : (i + 1) % 2 + 1);
}

// The server's value of element i once it applied `pushes[t]` gradients of each thread t.
float Expected(const int pushes[kThreads], uint64_t i) {
  return kStart - kRate * (static_cast<float>(pushes[0]) * Grad(0, i) +
                           static_cast<float>(pushes[1]) * Grad(1, i));
}

// Whether `values` is one state of the table (the pushes it holds are written to `pushes`).
bool IsState(const float* values, int pushes[kThreads]) {
  pushes[0] = static_cast<int>((kStart - values[0]) / kRate);
  pushes[1] = static_cast<int>((kStart - values[1]) / kRate);
  for (uint64_t i = 0; i < kDim; ++i) {
    if (values[i] != Expected(pushes, i)) return false;
  }
  return true;
}

enum class Written { kNoDenseParam, kDenseParam, kUnknown };

class AsyncSharedDenseTest : public testing::TestWithParam<Written> {
 protected:
  void SetUp() override {
    testing_async::StartAsyncSgdDense({kDense, kDim, kRate, kStart}, &root_, &servers_,
                                      &communicator_);
    if (HasFatalFailure()) return;
    hook_ = communicator_->hooks().at(0);
  }

  void TearDown() override {
    if (communicator_ != nullptr) communicator_->Stop();
  }

  framework::PassInfo Pass() const {
    framework::PassInfo pass;
    pass.num_threads = kThreads;
    pass.dataset_pass = true;
    if (GetParam() == Written::kNoDenseParam) pass.written_vars = {{"x", "w@GRAD"}};
    if (GetParam() == Written::kDenseParam) pass.written_vars = {{"w@GRAD", "w"}};
    return pass;
  }

  // The values thread t's steps read (its scope's parameter).
  const float* Read(int t) const {
    return scopes_[t]->FindVar("w")->Get<LoDTensor>().data<float>();
  }

  // kSteps steps of thread t, as the trainer runs them: each must read a whole state holding
  // every gradient the thread pushed before, unchanged until the step ends.
  void Train(int t) {
    LoDTensor grad;
    grad.Resize({static_cast<int64_t>(kDim)});
    float* g = grad.mutable_data<float>();
    for (uint64_t i = 0; i < kDim; ++i) g[i] = Grad(t, i);
    for (int step = 0; step < kSteps; ++step) {
      const framework::StepInfo info{t, kThreads, step, scopes_[t]};
      hook_->BeforeStep(info);
      int pushes[kThreads];
      ASSERT_TRUE(IsState(Read(t), pushes)) << "thread " << t << " step " << step;
      EXPECT_GE(pushes[t], step) << "thread " << t << " read values without its own gradients";
      const std::vector<float> read(Read(t), Read(t) + kDim);
      communicator_->SendDense(t, {&grad});
      hook_->AfterStep(info);
      EXPECT_EQ(std::vector<float>(Read(t), Read(t) + kDim), read)
          << "thread " << t << "'s values changed during step " << step;
    }
  }

  std::vector<std::unique_ptr<ps::PsServer>> servers_;
  Scope root_;
  Scope* scopes_[kThreads] = {};
  std::shared_ptr<Communicator> communicator_;
  std::shared_ptr<framework::StepHook> hook_;
};

TEST_P(AsyncSharedDenseTest, ThreadsReadWholeStatesWithTheirOwnGradients) {
  Scope* pass_scope = root_.NewScope();
  const float* copies[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    scopes_[t] = pass_scope->NewScope();
    hook_->PrepareThreadScope(t, scopes_[t]);
    copies[t] = Read(t);
    ASSERT_NE(copies[t], root_.FindVar("w")->Get<LoDTensor>().data<float>());
  }
  hook_->OnPassBegin(Pass());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([this, t] { Train(t); });
  for (auto& thread : threads) thread.join();

  // Every push is staged once each thread's last one is; a second round installs the latest.
  for (int round = 0; round < 2; ++round) {
    for (int t = kThreads - 1; t >= 0; --t) {
      const framework::StepInfo info{t, kThreads, kSteps + round, scopes_[t]};
      hook_->BeforeStep(info);
      hook_->AfterStep(info);  // a step begun and never ended counts as one that raised
    }
  }
  const int all[kThreads] = {kSteps, kSteps};
  for (int t = 0; t < kThreads; ++t) {
    for (uint64_t i = 0; i < kDim; ++i) EXPECT_EQ(Read(t)[i], Expected(all, i)) << "thread " << t;
  }
  if (GetParam() == Written::kNoDenseParam) {
    // Views of one staged buffer, not the copies the pass began with.
    EXPECT_EQ(Read(0), Read(1));
    EXPECT_NE(Read(0), copies[0]);
  } else {
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(Read(t), copies[t]) << "thread " << t;
  }
  for (int t = 0; t < kThreads; ++t) hook_->OnThreadEnd(t);
  hook_->OnPassEnd();
  pass_scope->DropKids();

  std::vector<float> dense(kDim);
  ASSERT_TRUE(communicator_->client().PullDense(kDense, absl::MakeSpan(dense)).Wait().ok());
  const float* root = root_.FindVar("w")->Get<LoDTensor>().data<float>();
  for (uint64_t i = 0; i < kDim; ++i) {
    EXPECT_EQ(dense[i], Expected(all, i));
    EXPECT_EQ(root[i], Expected(all, i));  // the pass's end brings the root scope up to date
  }
}

INSTANTIATE_TEST_SUITE_P(Passes, AsyncSharedDenseTest,
                         testing::Values(Written::kNoDenseParam, Written::kDenseParam,
                                         Written::kUnknown),
                         [](const testing::TestParamInfo<Written>& info) {
                           switch (info.param) {
                             case Written::kNoDenseParam:
                               return "NoDenseParamWritten";
                             case Written::kDenseParam:
                               return "DenseParamWritten";
                             default:
                               return "WrittenUnknown";
                           }
                         });

}  // namespace
}  // namespace fleet::distributed
