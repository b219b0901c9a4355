// Executor: prepare once, bind to scopes, run many times, with real ops from RegisterAllOps on a
// registry the test owns; errors carry the op's description.

#include "framework/executor.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fleet/build_config.h"
#include "operators/register_ops.h"

namespace fleet::framework {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

OpSpec Op(std::string type, VarNameMap inputs, VarNameMap outputs) {
  OpSpec op;
  op.type = std::move(type);
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  return op;
}

void AddVar(proto::BlockDesc* block, const std::string& name, bool persistable = false) {
  auto* var = block->add_vars();
  var->set_name(name);
  var->set_persistable(persistable);
}

// x -> relu -> y -> scale(2, bias 1) -> z
proto::ProgramDesc ReluScaleProgram() {
  proto::ProgramDesc program;
  auto* block = program.add_blocks();
  block->set_idx(0);
  block->set_parent_idx(-1);
  AddVar(block, "x");
  AddVar(block, "y");
  AddVar(block, "z");
  *block->add_ops() = OpSpecToProto(Op("relu", {{"X", {"x"}}}, {{"Out", {"y"}}}));
  OpSpec scale = Op("scale", {{"X", {"y"}}}, {{"Out", {"z"}}});
  scale.attrs.Set("scale", 2.f);
  scale.attrs.Set("bias", 1.f);
  scale.attrs.Set(kOpRoleAttr, int32_t{static_cast<int>(OpRole::kOptimize)});
  *block->add_ops() = OpSpecToProto(scale);
  return program;
}

void SetFloats(Scope* scope, const std::string& name, const std::vector<float>& values) {
  LoDTensor* t = scope->Var(name)->GetMutable<LoDTensor>();
  t->Resize({static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t->mutable_data<float>());
}

std::vector<float> GetFloats(const Scope& scope, const std::string& name) {
  const LoDTensor& t = scope.GetVar(name)->Get<LoDTensor>();
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

class ExecutorTest : public ::testing::Test {
 protected:
  ExecutorTest() { operators::RegisterAllOps(&registry_); }

  OpRegistry registry_;
  Executor executor_{&registry_};
  RunState state_;
};

TEST_F(ExecutorTest, PrepareBindRunManyTimes) {
  auto prepared = executor_.Prepare(ReluScaleProgram(), 0);
  ASSERT_EQ(prepared->ops.size(), 2u);
  EXPECT_EQ(prepared->ops[1].role, OpRole::kOptimize);
  Scope scope;
  SetFloats(&scope, "x", {-1.f, 0.5f, 3.f});
  BoundProgram bound = executor_.Bind(*prepared, &scope);
  RunStats stats;
  executor_.Run(bound, &state_, &stats);
  EXPECT_EQ(GetFloats(scope, "z"), (std::vector<float>{1.f, 2.f, 7.f}));
  // Same binding, new input values: the variables were resolved once.
  SetFloats(&scope, "x", {2.f, -4.f});
  executor_.Run(bound, &state_, &stats);
  EXPECT_EQ(GetFloats(scope, "y"), (std::vector<float>{2.f, 0.f}));
  EXPECT_EQ(GetFloats(scope, "z"), (std::vector<float>{5.f, 1.f}));
  EXPECT_EQ(stats.runs, 2);
  EXPECT_GE(stats.nanos_by_role[static_cast<int>(OpRole::kOptimize)], 0);
}

TEST_F(ExecutorTest, TwoChildScopesShareOnePreparedProgramAndPersistableVars) {
  proto::ProgramDesc program = ReluScaleProgram();
  program.mutable_blocks(0)->mutable_vars(0)->set_persistable(true);  // x lives in the root
  auto prepared = executor_.Prepare(program, 0);
  Scope root;
  SetFloats(&root, "x", {-2.f, 4.f});
  Scope* a = root.NewScope();
  Scope* b = root.NewScope();
  BoundProgram bound_a = executor_.Bind(*prepared, a);
  BoundProgram bound_b = executor_.Bind(*prepared, b);
  executor_.Run(bound_a, &state_);
  executor_.Run(bound_b, &state_);
  EXPECT_EQ(a->FindLocalVar("x"), nullptr);
  EXPECT_NE(a->FindLocalVar("z"), nullptr);
  EXPECT_NE(a->FindLocalVar("z"), b->FindLocalVar("z"));
  EXPECT_EQ(GetFloats(*a, "z"), (std::vector<float>{1.f, 9.f}));
  EXPECT_EQ(GetFloats(*b, "z"), GetFloats(*a, "z"));
  EXPECT_EQ(root.FindLocalVar("z"), nullptr);
}

TEST_F(ExecutorTest, UnknownOpTypeIsNotFound) {
  proto::ProgramDesc program = ReluScaleProgram();
  program.mutable_blocks(0)->mutable_ops(0)->set_type("no_such_op");
  try {
    executor_.Prepare(program, 0);
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    EXPECT_TRUE(Contains(e.what(), "unknown op type 'no_such_op'")) << e.what();
  }
}

TEST_F(ExecutorTest, MissingBlockIsNotFound) {
  try {
    executor_.Prepare(ReluScaleProgram(), 3);
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    EXPECT_TRUE(Contains(e.what(), "block 3 is not in the program (it has 1 blocks)")) << e.what();
  }
}

TEST_F(ExecutorTest, OnACudaPlaceOpsWithoutADeviceKernelRunTheirCpuKernel) {
  Executor gpu_executor(&registry_, CUDAPlace(0));
  auto prepared = gpu_executor.Prepare(ReluScaleProgram(), 0);  // preparing needs no device
  // relu and scale have CUDA kernels in a CUDA build; otherwise their CPU kernels run.
#ifdef FLEET_WITH_CUDA
  const Place expected = CUDAPlace(0);
#else
  const Place expected = CPUPlace();
#endif
  for (const PreparedOp& op : prepared->ops) EXPECT_EQ(op.kernel_place, expected) << op.spec.type;
}

TEST_F(ExecutorTest, OpWithoutAnyKernelIsRejected) {
  OpRegistry registry;
  registry.Register("kernelless");
  proto::ProgramDesc program;
  auto* block = program.add_blocks();
  block->set_idx(0);
  block->set_parent_idx(-1);
  *block->add_ops() = OpSpecToProto(Op("kernelless", {}, {}));
  for (const Place& place : {CPUPlace(), CUDAPlace(0)}) {
    try {
      Executor(&registry, place).Prepare(program, 0);
      FAIL() << "expected InvalidArgument";
    } catch (const InvalidArgument& e) {
      EXPECT_TRUE(Contains(e.what(), "op 'kernelless' has no kernel for " + place.ToString()))
          << e.what();
    }
  }
}

TEST_F(ExecutorTest, KernelErrorCarriesTheOpDescription) {
  auto prepared = executor_.Prepare(ReluScaleProgram(), 0);
  Scope scope;
  LoDTensor* x = scope.Var("x")->GetMutable<LoDTensor>();
  x->Resize({2});
  x->mutable_data<int32_t>();  // relu wants float32
  BoundProgram bound = executor_.Bind(*prepared, &scope);
  try {
    executor_.Run(bound, &state_);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    std::string what = e.what();
    EXPECT_TRUE(Contains(what, "op relu(X=[x]) -> (Out=[y]): ")) << what;
    EXPECT_TRUE(Contains(what, "int32, expected float32")) << what;
  }
}

TEST_F(ExecutorTest, InputNeverWrittenIsReportedWithTheOp) {
  auto prepared = executor_.Prepare(ReluScaleProgram(), 0);
  Scope scope;
  BoundProgram bound = executor_.Bind(*prepared, &scope);  // x is created but never fed
  try {
    executor_.Run(bound, &state_);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    std::string what = e.what();
    EXPECT_TRUE(Contains(what, "op relu(X=[x]) -> (Out=[y])")) << what;
    EXPECT_TRUE(Contains(what, "has no data")) << what;
  }
}

TEST_F(ExecutorTest, UndeclaredInputFailsAtBindWithTheOpAndCallsite) {
  proto::ProgramDesc program;
  auto* block = program.add_blocks();
  AddVar(block, "out");
  OpSpec relu = Op("relu", {{"X", {"ghost"}}}, {{"Out", {"out"}}});
  relu.attrs.Set(kOpCallsiteAttr, std::string("train.py:42"));
  *block->add_ops() = OpSpecToProto(relu);
  auto prepared = executor_.Prepare(program, 0);
  Scope scope;
  try {
    executor_.Bind(*prepared, &scope);
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    std::string what = e.what();
    EXPECT_TRUE(Contains(what, "op relu(X=[ghost]) -> (Out=[out]) created at train.py:42")) << what;
    EXPECT_TRUE(Contains(what, "variable 'ghost' of slot 'X'")) << what;
  }
}

TEST_F(ExecutorTest, RegistryHoldsTheRegisteredFamilies) {
  for (const char* type : {"feed", "fetch", "relu", "relu_grad", "scale", "sgd", "adam"}) {
    EXPECT_NE(registry_.Find(type), nullptr) << type;
  }
  EXPECT_THROW(registry_.Register("relu"), Internal);
  EXPECT_THROW(registry_.Get("nope"), NotFound);
}

}  // namespace
}  // namespace fleet::framework
