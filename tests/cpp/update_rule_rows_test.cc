// UpdateRule::UpdateRows (ps/table/update_rule.h), the update of several rows at once that GEO's
// local rows push with, against Update of each row in turn: every value and state float must
// match bit for bit, for every rule, with and without weight decay, at lengths around the vector
// widths and for the row layouts a caller may have (state right after the values, or further on).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "ps/table/update_rule.h"
#include "update_rules_for_tests.h"

namespace fleet::ps {
namespace {

// Row lengths below, at and above the lane counts (4, 8, 16); 10 is CTR-DNN's embedding.
const size_t kDims[] = {1, 3, 8, 10, 16, 17, 33};

proto::OptimizerConfig Config(const char* rule, float l2_decay) {
  proto::OptimizerConfig config;
  config.set_learning_rate(0.05f);
  config.set_l2_decay(l2_decay);
  if (std::strcmp(rule, "sgd") == 0) config.mutable_sgd();
  if (std::strcmp(rule, "adagrad") == 0) config.mutable_adagrad();
  if (std::strcmp(rule, "adam") == 0) config.mutable_adam();
  return config;
}

// `rows` rows of `stride` floats in one buffer, each with random values, its rule's initial
// state at `state_offset` and random floats in the gap between values and state and after the
// state (which neither update may touch).
std::vector<float> Rows(const UpdateRule& rule, size_t dim, size_t rows, size_t state_offset,
                        size_t stride, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> buffer(rows * stride);
  for (float& x : buffer) x = dist(rng);
  for (size_t r = 0; r < rows; ++r) rule.InitState(dim, buffer.data() + r * stride + state_offset);
  return buffer;
}

void ExpectRowsUpdateAsUpdateRowByRow(const char* name, float l2_decay) {
  for (size_t dim : kDims) {
    const std::unique_ptr<UpdateRule> rule = testing_rules::RuleOf(Config(name, l2_decay));
    ASSERT_NE(rule, nullptr);
    const size_t state_dim = rule->StateDim(dim);
    // State right after the values (LocalRows), and after a gap of dim floats.
    for (size_t state_offset : {dim, 2 * dim}) {
      const size_t stride = state_offset + state_dim + 3;
      const size_t kRows = 37;
      std::vector<float> batched = Rows(*rule, dim, kRows, state_offset, stride, 7);
      std::vector<float> one_by_one = batched;
      std::mt19937 rng(static_cast<uint32_t>(dim));
      std::uniform_real_distribution<float> grad(-0.5f, 0.5f);
      for (int push = 0; push < 25; ++push) {
        // Some rows, not in buffer order, each once; 25 pushes, so that the rows' Adam powers move
        // apart and away from their start.
        std::vector<size_t> chosen;
        for (size_t r = kRows; r-- > 0;) {
          if ((r + push) % 3 != 0) chosen.push_back(r);
        }
        std::vector<float> grads(chosen.size() * dim);
        for (float& g : grads) g = grad(rng);
        std::vector<float*> row_starts;
        for (size_t r : chosen) row_starts.push_back(batched.data() + r * stride);
        rule->UpdateRows(dim, absl::MakeConstSpan(row_starts), state_offset, grads.data());
        for (size_t k = 0; k < chosen.size(); ++k) {
          float* row = one_by_one.data() + chosen[k] * stride;
          rule->Update(dim, row, row + state_offset, grads.data() + k * dim);
        }
        ASSERT_EQ(std::memcmp(batched.data(), one_by_one.data(), batched.size() * sizeof(float)), 0)
            << name << " l2_decay " << l2_decay << " dim " << dim << " state at " << state_offset
            << " push " << push;
      }
    }
  }
}

TEST(UpdateRows, AdamUpdatesEachRowAsUpdateDoesBitForBit) {
  ExpectRowsUpdateAsUpdateRowByRow("adam", 0.0f);
}

TEST(UpdateRows, SgdAndAdagradUpdateEachRowAsUpdateDoesBitForBit) {
  ExpectRowsUpdateAsUpdateRowByRow("sgd", 0.0f);
  ExpectRowsUpdateAsUpdateRowByRow("adagrad", 0.0f);
}

TEST(UpdateRows, RulesWithWeightDecayUpdateEachRowAsUpdateDoesBitForBit) {
  ExpectRowsUpdateAsUpdateRowByRow("adam", 0.01f);
  ExpectRowsUpdateAsUpdateRowByRow("sgd", 0.01f);
}

}  // namespace
}  // namespace fleet::ps
