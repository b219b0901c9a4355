// The step-hook contract of framework/runtime.h as the threaded trainer keeps it: OnPassBegin
// once with the thread count and the variables the program writes, Before/AfterStep around every
// batch on the thread that runs it, OnThreadEnd once per thread, OnPassEnd once; kernels see the
// executor's resources; a persistable variable missing from the root scope is an error, not a
// per-thread copy; and OnBatchAhead announces, while a batch runs, the inputs of the batch the
// thread runs next.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "operators/register_ops.h"
#include "trainer/multi_trainer.h"

namespace fleet::trainer {
namespace {

class CountingHook : public framework::StepHook {
 public:
  void OnPassBegin(const framework::PassInfo& pass) override {
    ++begins;
    threads = pass.num_threads;
    dataset_pass = pass.dataset_pass;
    written_vars = pass.written_vars;
  }
  void BeforeStep(const framework::StepInfo& info) override {
    std::lock_guard<std::mutex> lock(mu);
    ++before;
    open_steps.insert(info.thread);
  }
  void AfterStep(const framework::StepInfo& info) override {
    std::lock_guard<std::mutex> lock(mu);
    ++after;
    // The same thread that began the step ends it.
    EXPECT_EQ(open_steps.erase(info.thread), 1u);
    EXPECT_EQ(info.num_threads, threads);
  }
  void OnThreadEnd(int thread) override {
    std::lock_guard<std::mutex> lock(mu);
    ended.insert(thread);
  }
  void OnPassEnd() override { ++ends; }
  std::string Name() const override { return "counting hook"; }

  std::mutex mu;
  std::atomic<int> begins{0}, ends{0};
  int before = 0, after = 0, threads = 0;
  bool dataset_pass = false;
  std::optional<std::vector<std::string>> written_vars;
  std::set<int> open_steps, ended;
};

std::string WriteLines(const std::string& name, int lines) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream out(path);
  for (int i = 0; i < lines; ++i) out << "1 " << i << ".5\n";
  return path;
}

// x (a dense float slot of width 1) -> scale -> y
framework::proto::ProgramDesc ScaleProgram(bool with_persistable) {
  framework::proto::ProgramDesc program;
  auto* block = program.add_blocks();
  block->set_idx(0);
  block->set_parent_idx(-1);
  for (const char* name : {"x", "y"}) block->add_vars()->set_name(name);
  if (with_persistable) {
    auto* w = block->add_vars();
    w->set_name("w");
    w->set_persistable(true);
  }
  framework::OpSpec scale;
  scale.type = "scale";
  scale.inputs = {{"X", {"x"}}};
  scale.outputs = {{"Out", {"y"}}};
  scale.attrs.Set("scale", 2.f);
  *block->add_ops() = framework::OpSpecToProto(scale);
  return program;
}

data::DataFeedConfig Config() {
  data::DataFeedConfig config;
  config.slots.push_back(data::MakeSlotSpec("x", DType::kFloat32, 0, {-1, 1}));
  config.batch_size = 4;
  config.threads = 2;
  return config;
}

// One dataset pass of ScaleProgram over `files` with `threads` trainer threads and the hooks.
TrainerResult RunPass(const std::vector<std::shared_ptr<framework::StepHook>>& hooks,
                      std::vector<std::string> files, int threads) {
  framework::OpRegistry registry;
  operators::RegisterAllOps(&registry);
  framework::Executor executor(&registry);
  for (const auto& hook : hooks) executor.resources()->AddStepHook(hook);
  auto prepared = executor.Prepare(ScaleProgram(false), 0);
  Scope root;
  data::QueueDataset dataset(Config(), std::move(files));
  TrainerOptions options;
  options.threads = threads;
  options.print_period = 0;
  MultiTrainer trainer(&executor, prepared.get(), &root, options);
  trainer.Start(&dataset);
  return trainer.Finish();
}

TEST(MultiTrainerHooks, EveryHookFiresAsTheContractSays) {
  auto hook = std::make_shared<CountingHook>();
  TrainerResult result =
      RunPass({hook}, {WriteLines("hooks_a.txt", 40), WriteLines("hooks_b.txt", 40)}, 2);
  EXPECT_EQ(result.samples, 80);
  EXPECT_EQ(hook->begins.load(), 1);
  EXPECT_EQ(hook->ends.load(), 1);
  EXPECT_EQ(hook->threads, 2);
  EXPECT_TRUE(hook->dataset_pass);
  // What the program's ops write: its one op's output (x and w are only read).
  EXPECT_EQ(hook->written_vars, (std::vector<std::string>{"y"}));
  EXPECT_EQ(hook->before, result.batches);
  EXPECT_EQ(hook->after, result.batches);
  EXPECT_TRUE(hook->open_steps.empty());
  EXPECT_EQ(hook->ended, (std::set<int>{0, 1}));
}

TEST(MultiTrainerHooks, APersistableMissingFromTheRootScopeIsAnError) {
  framework::OpRegistry registry;
  operators::RegisterAllOps(&registry);
  framework::Executor executor(&registry);
  auto prepared = executor.Prepare(ScaleProgram(true), 0);
  Scope root;
  data::QueueDataset dataset(Config(), {WriteLines("hooks_c.txt", 8)});
  TrainerOptions options;
  options.threads = 2;
  MultiTrainer trainer(&executor, prepared.get(), &root, options);
  try {
    trainer.Start(&dataset);
    FAIL() << "Start bound a program whose persistable 'w' is not in the root scope";
  } catch (const NotFound& e) {
    EXPECT_NE(std::string(e.what()).find("persistable variable 'w'"), std::string::npos)
        << e.what();
  }
}

// Records the first x of every batch a thread announces and of every batch it runs.
class LookAheadHook : public framework::StepHook {
 public:
  void OnBatchAhead(const framework::StepInfo& next) override {
    std::lock_guard<std::mutex> lock(mu);
    announced[{next.thread, next.step}] = FirstX(*next.scope);
  }
  void BeforeStep(const framework::StepInfo& info) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      ran[{info.thread, info.step}] = FirstX(*info.scope);
    }
    // A slow step: the reader has the next batch ready by the time the step ends.
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  std::string Name() const override { return "look-ahead hook"; }

  static float FirstX(const Scope& scope) {
    const Variable* x = scope.FindVar("x");
    EXPECT_NE(x, nullptr);
    return x->Get<LoDTensor>().data<float>()[0];
  }

  std::mutex mu;
  std::map<std::pair<int, int64_t>, float> announced, ran;
};

TEST(MultiTrainerHooks, TheNextBatchIsAnnouncedWithTheInputsItWillRunWith) {
  auto hook = std::make_shared<LookAheadHook>();
  TrainerResult result = RunPass({hook}, {WriteLines("ahead_a.txt", 40)}, 1);
  ASSERT_EQ(result.batches, 10);
  // Every batch but the first can be announced; one that was ready must have been.
  EXPECT_GE(hook->announced.size(), 5u);
  for (const auto& [key, x] : hook->announced) {
    EXPECT_GE(key.second, 1) << "the first batch has nothing before it to announce it";
    ASSERT_EQ(hook->ran.count(key), 1u) << "announced step " << key.second << " never ran";
    EXPECT_EQ(hook->ran[key], x) << "step " << key.second << " ran other inputs";
  }
}

// Records, for every batch announced, how far ahead of the running batch it was.
class DistanceHook : public framework::StepHook {
 public:
  explicit DistanceHook(int ahead) : ahead_(ahead) {}
  int BatchesAhead() const override { return ahead_; }
  void OnBatchAhead(const framework::StepInfo& next) override {
    std::lock_guard<std::mutex> lock(mu);
    // Announced before the running batch's BeforeStep: `running` is the step before it.
    distance[next.step] = next.step - (running + 1);
    announced_x[next.step] = LookAheadHook::FirstX(*next.scope);
    ++announcements;
  }
  void BeforeStep(const framework::StepInfo& info) override {
    std::lock_guard<std::mutex> lock(mu);
    running = info.step;
    ran_x[info.step] = LookAheadHook::FirstX(*info.scope);
  }
  std::string Name() const override { return "distance hook"; }

  std::mutex mu;
  int64_t running = -1;
  int announcements = 0;
  std::map<int64_t, int64_t> distance;
  std::map<int64_t, float> announced_x, ran_x;

 private:
  int ahead_;
};

TEST(RuntimeResources, ABatchIsAnnouncedToTheHooksThatWantItThatFarAhead) {
  framework::RuntimeResources resources;
  auto near = std::make_shared<DistanceHook>(1);
  auto far = std::make_shared<DistanceHook>(3);
  EXPECT_EQ(framework::MaxBatchesAhead(&resources), 1);
  resources.AddStepHook(near);
  resources.AddStepHook(far);
  EXPECT_EQ(framework::MaxBatchesAhead(&resources), 3);
  Scope scope;
  LoDTensor* x = scope.Var("x")->GetMutable<LoDTensor>();
  x->Resize({1, 1});
  x->mutable_data<float>()[0] = 1.5f;
  framework::StepInfo next{0, 1, 4, &scope};
  framework::RunBatchAhead(&resources, next, 3);
  framework::RunBatchAhead(&resources, next, 4);
  EXPECT_EQ(near->announcements, 0);
  EXPECT_EQ(far->announcements, 1);
  framework::RunBatchAhead(&resources, next, 1);
  EXPECT_EQ(near->announcements, 1);
  EXPECT_EQ(far->announcements, 2);
}

TEST(MultiTrainerHooks, BatchesAreAnnouncedOnceAndAtMostAsFarAheadAsTheHookWants) {
  auto near = std::make_shared<DistanceHook>(1);
  auto far = std::make_shared<DistanceHook>(3);
  TrainerResult result = RunPass({near, far}, {WriteLines("ahead_far.txt", 80)}, 1);
  ASSERT_EQ(result.batches, 20);
  for (const DistanceHook* hook : {near.get(), far.get()}) {
    // Each batch at most once, with the inputs it then ran with.
    EXPECT_EQ(static_cast<size_t>(hook->announcements), hook->distance.size());
    for (const auto& [step, x] : hook->announced_x) {
      ASSERT_EQ(hook->ran_x.count(step), 1u) << "announced step " << step << " never ran";
      EXPECT_EQ(hook->ran_x.at(step), x) << "step " << step << " ran other inputs";
    }
  }
  for (const auto& [step, distance] : far->distance) {
    EXPECT_GE(distance, 1) << "step " << step;
    EXPECT_LE(distance, 3) << "step " << step;
  }
  // The near hook sees a batch only when it was taken right before it ran; the far hook saw it
  // then too.
  for (const auto& [step, distance] : near->distance) {
    EXPECT_EQ(distance, 1) << "step " << step;
    EXPECT_EQ(far->distance.count(step), 1u) << "step " << step;
  }
}

struct Marker {
  static constexpr char kResourceName[] = "test marker";
  int value = 0;
};

TEST(RuntimeResources, TypedResourcesAndAClearErrorWhenMissing) {
  framework::RuntimeResources resources;
  EXPECT_EQ(resources.Find<Marker>(), nullptr);
  try {
    resources.Get<Marker>("op foo", "set it with SetMarker()");
    FAIL() << "Get of a missing resource returned";
  } catch (const Unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("op foo needs a test marker"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("SetMarker()"), std::string::npos);
  }
  auto marker = std::make_shared<Marker>();
  marker->value = 7;
  resources.Set(marker);
  EXPECT_EQ(resources.Get<Marker>("op foo", "").value, 7);
  resources.Remove<Marker>();
  EXPECT_EQ(resources.Find<Marker>(), nullptr);
}

class ThrowingHook : public framework::StepHook {
 public:
  void OnPassEnd() override { throw InvalidArgument("first hook failed"); }
  std::string Name() const override { return "throwing"; }
};

TEST(RuntimeResources, PassEndReachesEveryHookAndRethrowsTheFirstError) {
  framework::RuntimeResources resources;
  auto counting = std::make_shared<CountingHook>();
  resources.AddStepHook(std::make_shared<ThrowingHook>());
  resources.AddStepHook(counting);
  EXPECT_THROW(framework::RunPassEnd(&resources), InvalidArgument);
  EXPECT_EQ(counting->ends.load(), 1);
  resources.RemoveStepHook(counting.get());
  EXPECT_EQ(resources.step_hooks().size(), 1u);
}

}  // namespace
}  // namespace fleet::trainer
