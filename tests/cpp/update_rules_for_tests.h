#pragma once
// The update rules the C++ tests build LocalRows and tables with: SGD or Adam at a given rate,
// made the way a table's optimizer config makes them (ps::MakeUpdateRule).

#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "ps/table/update_rule.h"

namespace fleet::ps::testing_rules {

// The rule of `config`; fails the calling test when the config is refused.
inline std::unique_ptr<UpdateRule> RuleOf(const proto::OptimizerConfig& config) {
  auto rule = MakeUpdateRule(config);
  EXPECT_TRUE(rule.ok()) << rule.status();
  return rule.ok() ? std::move(*rule) : nullptr;
}

inline std::unique_ptr<UpdateRule> SgdRule(float rate) {
  proto::OptimizerConfig config;
  config.set_learning_rate(rate);
  config.mutable_sgd();
  return RuleOf(config);
}

inline std::unique_ptr<UpdateRule> AdamRule(float rate) {
  proto::OptimizerConfig config;
  config.set_learning_rate(rate);
  config.mutable_adam();
  return RuleOf(config);
}

}  // namespace fleet::ps::testing_rules
