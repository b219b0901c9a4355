// The early barrier work of data parallelism (DataParallelOptions::early_barrier_work), forced:
// the Python tests check its results bit for bit, but whether a replica reaches the barrier
// early enough to run a task there is timing, so they cannot say the path ran. Here a gate op at
// the end of the compute program holds replica 1 until replica 0 has run a task early, and
// replica 0 until replica 1 is inside its gate (past the gradient's last access): each
// overlapped step can then only finish through the early path, and a step that waited for the
// gate's deadline instead fails the test rather than hanging it.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "operators/op_helpers.h"
#include "operators/register_ops.h"
#include "trainer/data_parallel.h"

namespace fleet::trainer {
namespace {

constexpr int kWidth = 4;
constexpr int kSteps = 5;
constexpr float kLearningRate = 0.5f;
constexpr auto kGateDeadline = std::chrono::seconds(30);

// What the gate op sees: the engine (set once it exists), whether the gates hold this step, and
// how far the early tasks must have come for replica 1 to pass.
struct Gate {
  std::atomic<const DataParallelEngine*> engine{nullptr};
  std::atomic<bool> armed{false};
  std::atomic<int64_t> early_tasks_to_pass{0};
  std::atomic<bool> replica1_inside{false};
  std::atomic<int> deadlines_hit{0};

  // Waits for `ready`; past the deadline it counts a failure and lets the step go on.
  template <typename Ready>
  void Await(Ready ready) {
    const auto deadline = std::chrono::steady_clock::now() + kGateDeadline;
    while (!ready()) {
      if (std::chrono::steady_clock::now() > deadline) {
        deadlines_hit.fetch_add(1);
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
};

// "gate": X is the replica's id (fed), Out a variable nothing else touches.
void RegisterGate(framework::OpRegistry* registry, Gate* gate) {
  framework::OpInfo& op = registry->Register("gate");
  operators::SetCpuKernel(&op, [gate](const framework::ExecutionContext& ctx) {
    const int replica = static_cast<int>(ctx.Input("X").data<float>()[0]);
    LoDTensor* out = ctx.Output("Out");
    out->Resize({1});
    out->mutable_data<float>()[0] = static_cast<float>(replica);
    if (!gate->armed.load()) return;
    if (replica == 1) {
      gate->replica1_inside.store(true);
      gate->Await([gate] {
        return gate->engine.load()->early_barrier_tasks() >= gate->early_tasks_to_pass.load();
      });
      gate->replica1_inside.store(false);
    } else {
      gate->Await([gate] { return gate->replica1_inside.load(); });
    }
  });
}

framework::proto::VarDesc* AddVar(framework::proto::BlockDesc* block, const std::string& name,
                                  bool persistable = false) {
  auto* var = block->add_vars();
  var->set_name(name);
  var->set_persistable(persistable);
  return var;
}

framework::proto::ProgramDesc OneBlock() {
  framework::proto::ProgramDesc program;
  auto* block = program.add_blocks();
  block->set_idx(0);
  block->set_parent_idx(-1);
  return program;
}

// w@GRAD = 2 x, v@GRAD = 3 x, then the gate: three segments, each cut after a gradient's last
// access. Two parameters of one size, one owned by each replica: the engine overlaps the
// reduction with the compute program only when the replicas' shares of the work are balanced.
framework::proto::ProgramDesc ComputeProgram() {
  framework::proto::ProgramDesc program = OneBlock();
  auto* block = program.mutable_blocks(0);
  for (const char* name : {"x", "id", "w@GRAD", "v@GRAD", "gate_out"}) AddVar(block, name);
  AddVar(block, "w", true);
  AddVar(block, "v", true);
  for (const auto& [gradient, factor] : {std::pair{"w@GRAD", 2.f}, std::pair{"v@GRAD", 3.f}}) {
    framework::OpSpec scale;
    scale.type = "scale";
    scale.inputs = {{"X", {"x"}}};
    scale.outputs = {{"Out", {gradient}}};
    scale.attrs.Set("scale", factor);
    *block->add_ops() = framework::OpSpecToProto(scale);
  }
  framework::OpSpec gate;
  gate.type = "gate";
  gate.inputs = {{"X", {"id"}}};
  gate.outputs = {{"Out", {"gate_out"}}};
  *block->add_ops() = framework::OpSpecToProto(gate);
  return program;
}

// param -= lr * param@GRAD: w's update runs on replica 0, v's on replica 1.
framework::proto::ProgramDesc UpdateProgram(const std::string& param) {
  framework::proto::ProgramDesc program = OneBlock();
  auto* block = program.mutable_blocks(0);
  AddVar(block, param + "@GRAD");
  AddVar(block, param, true);
  AddVar(block, "lr", true);
  framework::OpSpec sgd;
  sgd.type = "sgd";
  sgd.inputs = {{"Param", {param}}, {"Grad", {param + "@GRAD"}}, {"LearningRate", {"lr"}}};
  sgd.outputs = {{"ParamOut", {param}}};
  *block->add_ops() = framework::OpSpecToProto(sgd);
  return program;
}

LoDTensor Filled(const Shape& shape, float first, float step) {
  LoDTensor tensor;
  tensor.Resize(shape);
  float* data = tensor.mutable_data<float>();
  for (int64_t i = 0; i < NumElements(shape); ++i) data[i] = first + step * static_cast<float>(i);
  return tensor;
}

struct Trained {
  std::vector<float> w, v;
  int64_t overlapped_steps = 0;
  int64_t early_tasks = 0;
  int deadlines_hit = 0;
};

// `steps` steps of two replicas; the gates hold from the second step on when `gated`.
Trained Train(bool early_barrier_work, bool gated, int steps) {
  framework::OpRegistry registry;
  operators::RegisterAllOps(&registry);
  Gate gate;
  RegisterGate(&registry, &gate);
  framework::Executor executor(&registry);
  auto compute = executor.Prepare(ComputeProgram(), 0);
  auto update_w = executor.Prepare(UpdateProgram("w"), 0);
  auto update_v = executor.Prepare(UpdateProgram("v"), 0);
  Scope root;
  *root.Var("w")->GetMutable<LoDTensor>() = Filled({kWidth}, 1.f, 0.25f);
  *root.Var("v")->GetMutable<LoDTensor>() = Filled({kWidth}, -1.f, 0.5f);
  *root.Var("lr")->GetMutable<LoDTensor>() = Filled({1}, kLearningRate, 0.f);
  DataParallelOptions options;
  options.replicas = 2;
  options.gradients = {"w@GRAD", "v@GRAD"};
  options.gradient_owners = {0, 1};
  options.early_barrier_work = early_barrier_work;
  DataParallelEngine engine(&executor, compute.get(), {{update_w.get(), update_v.get()}}, &root,
                            options);
  gate.engine.store(&engine);
  for (int step = 0; step < steps; ++step) {
    // The first step is not overlapped (the engine learns the plan is owner-local from it), so
    // nothing could run early then.
    gate.armed.store(gated && step > 0);
    gate.early_tasks_to_pass.store(engine.early_barrier_tasks() + 1);
    std::vector<std::vector<LoDTensor>> feeds;
    for (int r = 0; r < 2; ++r) {
      feeds.push_back({Filled({kWidth}, static_cast<float>(step + r), 0.5f),
                       Filled({1}, static_cast<float>(r), 0.f)});
    }
    engine.Step({"x", "id"}, std::move(feeds), {}, nullptr);
  }
  auto values = [&root](const std::string& name) {
    const float* data = root.FindVar(name)->Get<LoDTensor>().data<float>();
    return std::vector<float>(data, data + kWidth);
  };
  return {values("w"), values("v"), engine.overlapped_steps(), engine.early_barrier_tasks(),
          gate.deadlines_hit.load()};
}

TEST(EarlyBarrierWork, AReplicaWaitingAtTheBarrierRunsItsReadyTaskThere) {
  const Trained early = Train(/*early_barrier_work=*/true, /*gated=*/true, kSteps);
  EXPECT_EQ(early.deadlines_hit, 0)
      << "a gate waited " << kGateDeadline.count() << " s for a task the engine never ran early";
  EXPECT_EQ(early.overlapped_steps, kSteps - 1);
  // Replica 0's one task (w's reduction and update), once every overlapped step; replica 1,
  // the last to finish, has no wait to fill.
  EXPECT_EQ(early.early_tasks, kSteps - 1);

  const Trained late = Train(/*early_barrier_work=*/false, /*gated=*/false, kSteps);
  EXPECT_EQ(late.early_tasks, 0);
  // Bit for bit: the same reductions and updates, only earlier.
  EXPECT_EQ(early.w, late.w);
  EXPECT_EQ(early.v, late.v);

  // And what SGD on the mean gradient gives: param@GRAD averages factor * x over the replicas.
  auto expected = [](float first, float step_in_row, float factor) {
    std::vector<float> values(kWidth);
    for (int i = 0; i < kWidth; ++i) {
      float value = first + step_in_row * static_cast<float>(i);
      for (int step = 0; step < kSteps; ++step) {
        const float x0 = static_cast<float>(step) + 0.5f * static_cast<float>(i);
        value -= kLearningRate * factor * (x0 + (x0 + 1.f)) * 0.5f;
      }
      values[static_cast<size_t>(i)] = value;
    }
    return values;
  };
  const std::vector<float> w = expected(1.f, 0.25f, 2.f), v = expected(-1.f, 0.5f, 3.f);
  for (size_t i = 0; i < kWidth; ++i) {
    EXPECT_NEAR(early.w[i], w[i], 1e-4f) << i;
    EXPECT_NEAR(early.v[i], v[i], 1e-4f) << i;
  }
}

}  // namespace
}  // namespace fleet::trainer
