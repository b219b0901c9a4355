// Scope: lookups through parents, shadowing, child scopes, thread-safe variable creation.

#include "core/scope.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace fleet {
namespace {

TEST(ScopeTest, VarCreatesOnceAndFindsLocally) {
  Scope scope;
  Variable* w = scope.Var("w");
  EXPECT_EQ(scope.Var("w"), w);
  EXPECT_EQ(scope.FindVar("w"), w);
  EXPECT_EQ(scope.FindLocalVar("w"), w);
  EXPECT_EQ(scope.FindVar("b"), nullptr);
  EXPECT_FALSE(w->IsInitialized());
}

TEST(ScopeTest, KidsSeeTheirAncestorsVariables) {
  Scope root;
  Variable* w = root.Var("w");
  Scope* kid = root.NewScope();
  Scope* grandkid = kid->NewScope();
  EXPECT_EQ(kid->parent(), &root);
  EXPECT_EQ(grandkid->parent(), kid);
  EXPECT_EQ(grandkid->FindVar("w"), w);
  EXPECT_EQ(grandkid->GetVar("w"), w);
  EXPECT_EQ(grandkid->FindLocalVar("w"), nullptr);
  // Parents do not see their kids' variables.
  grandkid->Var("activation");
  EXPECT_EQ(root.FindVar("activation"), nullptr);
  EXPECT_EQ(kid->FindVar("activation"), nullptr);
}

TEST(ScopeTest, LocalVariableShadowsTheParents) {
  Scope root;
  root.Var("w")->GetMutable<LoDTensor>()->Resize({3});
  Scope* kid = root.NewScope();
  Variable* local = kid->Var("w");
  EXPECT_NE(local, root.FindVar("w"));
  EXPECT_EQ(kid->FindVar("w"), local);
  EXPECT_FALSE(local->IsInitialized());
  EXPECT_EQ(root.FindVar("w")->Get<LoDTensor>().numel(), 3);
  EXPECT_TRUE(kid->EraseLocalVar("w"));
  EXPECT_FALSE(kid->EraseLocalVar("w"));
  EXPECT_EQ(kid->FindVar("w"), root.FindVar("w"));  // the parent's shows through again
}

TEST(ScopeTest, GetVarNamesTheMissingVariable) {
  Scope scope;
  try {
    scope.GetVar("fc_0.w_0");
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    EXPECT_NE(std::string(e.what()).find("'fc_0.w_0'"), std::string::npos) << e.what();
  }
}

TEST(ScopeTest, LocalVarNamesAreSortedAndDropKidsForgetsKids) {
  Scope root;
  root.Var("b");
  root.Var("a");
  Scope* kid = root.NewScope();
  kid->Var("z");
  EXPECT_EQ(root.LocalVarNames(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(kid->LocalVarNames(), (std::vector<std::string>{"z"}));
  root.DropKids();  // `kid` is destroyed; only the root is left
  EXPECT_EQ(root.LocalVarNames(), (std::vector<std::string>{"a", "b"}));
}

TEST(ScopeTest, VariableKinds) {
  Scope scope;
  Variable* v = scope.Var("grad");
  v->GetMutable<SelectedRows>()->set_height(10);
  EXPECT_TRUE(v->IsType<SelectedRows>());
  EXPECT_STREQ(v->KindName(), "SelectedRows");
  try {
    v->Get<LoDTensor>();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "variable holds SelectedRows but is read as LoDTensor");
  }
  v->Clear();
  EXPECT_FALSE(v->IsInitialized());
}

TEST(ScopeTest, ConcurrentVarFromFourThreadsAgrees) {
  constexpr int kThreads = 4;
  constexpr int kNames = 2003;  // prime, so every stride below is a permutation
  Scope root;
  Scope* kid = root.NewScope();
  std::vector<std::vector<Variable*>> seen(kThreads, std::vector<Variable*>(kNames));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread walks the names in its own order, so creations race.
      for (int i = 0; i < kNames; ++i) {
        int n = (i * (2 * t + 1) + t * 17) % kNames;
        seen[t][n] = kid->Var("v" + std::to_string(n));
        kid->FindVar("v" + std::to_string((n + 1) % kNames));
      }
      root.NewScope();  // creating kids concurrently is safe too
    });
  }
  for (auto& thread : threads) thread.join();
  for (int n = 0; n < kNames; ++n) {
    ASSERT_NE(seen[0][n], nullptr);
    for (int t = 1; t < kThreads; ++t) ASSERT_EQ(seen[t][n], seen[0][n]) << "name v" << n;
    ASSERT_EQ(kid->FindLocalVar("v" + std::to_string(n)), seen[0][n]);
  }
  EXPECT_EQ(kid->LocalVarNames().size(), static_cast<size_t>(kNames));
  EXPECT_TRUE(root.LocalVarNames().empty());
}

}  // namespace
}  // namespace fleet
