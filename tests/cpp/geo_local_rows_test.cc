// GEO's worker-side rows (distributed/detail/local_rows.h) against a plain reference: a map of
// rows, each push's repeated ids summed in their order and then updated by the same rule. Values,
// rule state (seen through later updates) and deltas must match bit for bit, through pushes with
// repeated ids, pulls of absent ids, exchanges (TakeDeltas + Reset) and several threads pushing;
// and the rebase of an exchange's fresh values (TakeDeltas + Rebase), which keeps what changed
// while the deltas travelled; and the Lookups that let a push and a rebase skip the id lookups,
// which must change nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "distributed/detail/local_rows.h"
#include "update_rules_for_tests.h"

namespace fleet::distributed::detail {
namespace {

constexpr size_t kDim = 3;

std::unique_ptr<ps::UpdateRule> Adam() { return ps::testing_rules::AdamRule(0.05f); }

// The reference: what LocalRows promises, written the obvious way.
class ReferenceRows {
 public:
  explicit ReferenceRows(size_t dim) : dim_(dim), rule_(Adam()) {}

  void Reset(const std::vector<int64_t>& keys, const std::vector<float>& values) {
    for (size_t i = 0; i < keys.size(); ++i) {
      Row& row = rows_[keys[i]];
      if (row.state.empty()) {
        row.state.resize(rule_->StateDim(dim_));
        rule_->InitState(dim_, row.state.data());
      }
      row.value.assign(values.begin() + i * dim_, values.begin() + (i + 1) * dim_);
      row.synced = row.value;
    }
  }
  void Update(const std::vector<int64_t>& keys, const std::vector<float>& grads) {
    std::vector<int64_t> order;
    std::map<int64_t, std::vector<float>> sums;
    for (size_t i = 0; i < keys.size(); ++i) {
      const float* g = grads.data() + i * dim_;
      auto [it, inserted] = sums.try_emplace(keys[i], g, g + dim_);
      if (inserted) {
        order.push_back(keys[i]);
      } else {
        for (size_t j = 0; j < dim_; ++j) it->second[j] += g[j];
      }
    }
    for (int64_t key : order) {
      Row& row = rows_.at(key);
      rule_->Update(dim_, row.value.data(), row.state.data(), sums[key].data());
      touched_[key] = true;
    }
  }
  // Deltas by id.
  std::map<int64_t, std::vector<float>> TakeDeltas(float scale) {
    std::map<int64_t, std::vector<float>> deltas;
    for (const auto& [key, yes] : touched_) {
      const Row& row = rows_.at(key);
      std::vector<float>& d = deltas[key];
      for (size_t j = 0; j < dim_; ++j) d.push_back(scale * (row.value[j] - row.synced[j]));
    }
    touched_.clear();
    return deltas;
  }
  const std::vector<float>& Value(int64_t key) const { return rows_.at(key).value; }
  bool Has(int64_t key) const { return rows_.count(key) > 0; }

 private:
  struct Row {
    std::vector<float> value, synced, state;
  };
  size_t dim_;
  std::unique_ptr<ps::UpdateRule> rule_;
  std::map<int64_t, Row> rows_;
  std::map<int64_t, bool> touched_;
};

std::map<int64_t, std::vector<float>> DeltasById(LocalRows* rows, float scale, size_t dim = kDim) {
  std::vector<int64_t> keys;
  std::vector<float> deltas;
  rows->TakeDeltas(scale, &keys, &deltas);
  std::map<int64_t, std::vector<float>> by_id;
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(by_id.count(keys[i]), 0u) << "id " << keys[i] << " twice in one exchange";
    by_id[keys[i]].assign(deltas.begin() + i * dim, deltas.begin() + (i + 1) * dim);
  }
  return by_id;
}

// Adam's rows of dim 3 (14 floats) are padded to 16, of dim 10 (42) to 48, whole cache lines,
// and of dim 4 (18) packed: every layout of a row must keep the same values, state and deltas.
class GeoLocalRowsOfDim : public ::testing::TestWithParam<size_t> {};

TEST_P(GeoLocalRowsOfDim, PushesPullsAndExchangesMatchTheReferenceBitForBit) {
  const size_t dim = GetParam();
  LocalRows rows(dim, Adam());
  ReferenceRows reference(dim);
  std::mt19937 random(11);
  std::uniform_real_distribution<float> grad(-1.0f, 1.0f);
  for (int step = 1; step <= 40; ++step) {
    // A batch of 300 ids from 200, so most ids repeat within it and new ids keep coming early.
    std::vector<int64_t> keys(300);
    for (int64_t& key : keys) key = static_cast<int64_t>(random() % 200) * 7919 - 500000;
    std::vector<float> out(keys.size() * dim, -9.0f);
    std::vector<size_t> missing = rows.Read(keys, absl::MakeSpan(out));
    std::vector<size_t> expected_missing;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!reference.Has(keys[i])) {
        expected_missing.push_back(i);
      } else {
        ASSERT_EQ(0, std::memcmp(out.data() + i * dim, reference.Value(keys[i]).data(),
                                 dim * sizeof(float)))
            << "step " << step << " id " << keys[i];
      }
    }
    ASSERT_EQ(missing, expected_missing) << "step " << step;
    if (!missing.empty()) {
      std::vector<int64_t> absent;
      std::vector<float> values;
      for (size_t m : missing) {
        absent.push_back(keys[m]);
        for (size_t j = 0; j < dim; ++j) values.push_back(0.1f * static_cast<float>(j + m % 5));
      }
      rows.Reset(absent, values);  // repeated absent ids: the last values win, as in the reference
      reference.Reset(absent, values);
    }
    std::vector<float> grads(keys.size() * dim);
    for (float& g : grads) g = grad(random);
    rows.Update(keys, grads);
    reference.Update(keys, grads);
    if (step % 7 == 0) {
      auto expected = reference.TakeDeltas(0.5f);
      auto got = DeltasById(&rows, 0.5f, dim);
      ASSERT_EQ(got, expected) << "step " << step;
      // The exchange's fresh values become value and synced.
      std::vector<int64_t> ids;
      std::vector<float> fresh;
      for (const auto& [id, d] : got) {
        ids.push_back(id);
        for (size_t j = 0; j < dim; ++j) fresh.push_back(d[j] * 3.0f + 1.0f);
      }
      rows.Reset(ids, fresh);
      reference.Reset(ids, fresh);
      EXPECT_TRUE(DeltasById(&rows, 1.0f, dim).empty()) << "a Reset is not a change";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PaddedAndPackedRows, GeoLocalRowsOfDim, ::testing::Values(3, 4, 10));

TEST(GeoLocalRows, APushOfAnIdNeverPulledIsAnError) {
  LocalRows rows(kDim, Adam());
  rows.Reset({1}, {0.f, 0.f, 0.f});
  EXPECT_THROW(rows.Update({1, 2}, std::vector<float>(2 * kDim, 1.0f)), Internal);
}

TEST(GeoLocalRows, ThreadsPushingTheSameIdsLoseNoUpdate) {
  // SGD, so that the order of the threads' pushes does not change the sum (every step is exact
  // in floats: multiples of 1/4).
  ps::proto::OptimizerConfig config;
  config.set_learning_rate(0.25f);
  config.mutable_sgd();
  auto rule = ps::MakeUpdateRule(config);
  ASSERT_TRUE(rule.ok());
  LocalRows rows(1, std::move(*rule));
  std::vector<int64_t> ids(64);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i) * 1000003;
  rows.Reset(ids, std::vector<float>(ids.size(), 0.0f));
  constexpr int kThreads = 4, kPushes = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      // Every id twice per push: its gradient is summed to 2 before the update.
      std::vector<int64_t> keys = ids;
      keys.insert(keys.end(), ids.begin(), ids.end());
      for (int p = 0; p < kPushes; ++p) rows.Update(keys, std::vector<float>(keys.size(), 1.0f));
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<float> out(ids.size());
  EXPECT_TRUE(rows.Read(ids, absl::MakeSpan(out)).empty());
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_EQ(out[i], -0.25f * 2.0f * kThreads * kPushes) << "id " << ids[i];
  }
  auto deltas = DeltasById(&rows, 1.0f, 1);
  EXPECT_EQ(deltas.size(), ids.size());
}

// SGD at rate 1/4 on dim 1: every value below is exact in floats.
std::unique_ptr<ps::UpdateRule> QuarterSgd() { return ps::testing_rules::SgdRule(0.25f); }

TEST(GeoLocalRows, ARebaseKeepsWhatChangedSinceTheDeltasWereTaken) {
  LocalRows rows(1, QuarterSgd());
  rows.Reset({5, 6}, {1.0f, 2.0f});
  rows.Update({5, 6}, {1.0f, 1.0f});  // 0.75, 1.75
  ASSERT_EQ(DeltasById(&rows, 1.0f, 1),
            (std::map<int64_t, std::vector<float>>{{5, {-0.25f}}, {6, {-0.25f}}}));
  rows.Update({5}, {1.0f});  // 0.5: made while the deltas travel
  rows.Rebase({5, 6}, {10.0f, 20.0f});
  std::vector<float> out(2);
  ASSERT_TRUE(rows.Read({5, 6}, absl::MakeSpan(out)).empty());
  EXPECT_EQ(out, (std::vector<float>{9.75f, 20.0f}));
  // The update made meanwhile goes with the next exchange, and only it.
  EXPECT_EQ(DeltasById(&rows, 1.0f, 1), (std::map<int64_t, std::vector<float>>{{5, {-0.25f}}}));
  EXPECT_THROW(rows.Rebase({7}, {1.0f}), Internal);
}

TEST(GeoLocalRows, ARebaseWithNothingChangedMeanwhileIsAResetBitForBit) {
  // Two copies with the same history (Adam: state and rounding matter); one takes the fresh
  // values by Reset, the other by Rebase, then both train on.
  LocalRows reset(kDim, Adam()), rebase(kDim, Adam());
  std::mt19937 random(5);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<int64_t> ids(50);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i) * 31 - 700;
  std::vector<float> start(ids.size() * kDim);
  for (float& v : start) v = value(random);
  reset.Reset(ids, start);
  rebase.Reset(ids, start);
  for (int exchange = 0; exchange < 5; ++exchange) {
    for (int step = 0; step < 3; ++step) {
      std::vector<float> grads(ids.size() * kDim);
      for (float& g : grads) g = value(random);
      reset.Update(ids, grads);
      rebase.Update(ids, grads);
    }
    ASSERT_EQ(DeltasById(&reset, 0.5f), DeltasById(&rebase, 0.5f));
    std::vector<float> fresh(ids.size() * kDim);
    for (float& v : fresh) v = value(random) * 3.0f;
    reset.Reset(ids, fresh);
    rebase.Rebase(ids, fresh);
    std::vector<float> a(ids.size() * kDim), b(ids.size() * kDim);
    reset.Read(ids, absl::MakeSpan(a));
    rebase.Read(ids, absl::MakeSpan(b));
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
        << "exchange " << exchange;
  }
}

TEST(GeoLocalRows, ExchangesRebasedWhileThreadsPushLoseNoUpdate) {
  // Trainer threads push while another thread exchanges: takes the deltas, adds them to a
  // "server" copy and rebases the rows onto it. Every update ends on the server exactly once.
  LocalRows rows(1, QuarterSgd());
  std::vector<int64_t> ids(64);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i) * 1000003;
  rows.Reset(ids, std::vector<float>(ids.size(), 0.0f));
  std::map<int64_t, float> server;
  for (int64_t id : ids) server[id] = 0.0f;
  auto exchange = [&] {
    std::vector<int64_t> keys;
    std::vector<float> deltas;
    rows.TakeDeltas(1.0f, &keys, &deltas);
    std::vector<float> fresh(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) fresh[i] = server[keys[i]] += deltas[i];
    rows.Rebase(keys, fresh);
  };
  // Each thread pushes until it made kPushes pushes and kExchanges exchanges happened, so that
  // the exchanges overlap the pushes however the threads are scheduled.
  constexpr int kThreads = 3, kPushes = 300, kExchanges = 50;
  std::atomic<int> running{kThreads}, exchanges{0}, pushes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int p = 0; p < kPushes || exchanges.load() < kExchanges; ++p) {
        rows.Update(ids, std::vector<float>(ids.size(), 1.0f));
        ++pushes;
      }
      --running;
    });
  }
  while (running.load() > 0) {
    exchange();
    ++exchanges;
  }
  for (std::thread& thread : threads) thread.join();
  exchange();
  std::vector<float> out(ids.size());
  ASSERT_TRUE(rows.Read(ids, absl::MakeSpan(out)).empty());
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_EQ(server[ids[i]], -0.25f * static_cast<float>(pushes.load())) << "id " << ids[i];
    ASSERT_EQ(out[i], server[ids[i]]) << "id " << ids[i];
  }
}

// Reads, pushes and exchanges through two copies, one of them with the Lookups GEO passes (the
// step's Read for its Update, the exchange's TakeDeltas for its Rebase), some of them stale:
// every value, delta and missing position must be the same bit for bit.
TEST(GeoLocalRows, LookupsOfReadsAndExchangesChangeNothingBitForBit) {
  LocalRows plain(kDim, Adam()), looked(kDim, Adam());
  LocalRows::Lookup step_lookup, exchange_lookup;
  std::mt19937 random(23);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  auto draw_keys = [&](size_t n) {
    // From 300 ids, so that most repeat within a batch and new ones keep coming.
    std::vector<int64_t> keys(n);
    for (int64_t& key : keys) key = static_cast<int64_t>(random() % 300) * 104729 - 3000000;
    return keys;
  };
  std::vector<int64_t> taken_keys;
  std::vector<float> taken_fresh;
  for (int step = 1; step <= 60; ++step) {
    const std::vector<int64_t> keys = draw_keys(400);
    std::vector<float> a(keys.size() * kDim, -7.0f), b(keys.size() * kDim, -7.0f);
    const std::vector<size_t> missing = plain.Read(keys, absl::MakeSpan(a));
    ASSERT_EQ(looked.Read(keys, absl::MakeSpan(b), &step_lookup), missing) << "step " << step;
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "step " << step;
    if (!missing.empty()) {  // the rows the Lookup lacks come after it
      std::vector<int64_t> absent;
      std::vector<float> values;
      for (size_t m : missing) {
        absent.push_back(keys[m]);
        for (size_t j = 0; j < kDim; ++j) values.push_back(value(random));
      }
      plain.Reset(absent, values);
      looked.Reset(absent, values);
    }
    if (step % 5 == 0) {
      // A Read of other ids in between: the Lookup then holds those and must be ignored.
      const std::vector<int64_t> other = draw_keys(keys.size());
      std::vector<float> unused(other.size() * kDim);
      looked.Read(other, absl::MakeSpan(unused), &step_lookup);
    }
    std::vector<float> grads(keys.size() * kDim);
    for (float& g : grads) g = value(random);
    plain.Update(keys, grads);
    looked.Update(keys, grads, &step_lookup);
    if (!taken_keys.empty()) {  // the last exchange's fresh values arrive after a push
      plain.Rebase(taken_keys, taken_fresh);
      looked.Rebase(taken_keys, taken_fresh, &exchange_lookup);
      taken_keys.clear();
    }
    if (step % 6 == 0) {
      std::vector<float> plain_deltas, looked_deltas;
      plain.TakeDeltas(0.5f, &taken_keys, &plain_deltas);
      std::vector<int64_t> looked_keys;
      looked.TakeDeltas(0.5f, &looked_keys, &looked_deltas, &exchange_lookup);
      ASSERT_EQ(looked_keys, taken_keys) << "step " << step;
      ASSERT_EQ(0, std::memcmp(plain_deltas.data(), looked_deltas.data(),
                               plain_deltas.size() * sizeof(float)))
          << "step " << step;
      taken_fresh.resize(plain_deltas.size());
      for (size_t i = 0; i < taken_fresh.size(); ++i) {
        taken_fresh[i] = 2.0f * plain_deltas[i] + value(random);
      }
    }
  }
  const std::vector<int64_t> every = draw_keys(2000);
  std::vector<float> a(every.size() * kDim), b(every.size() * kDim);
  ASSERT_EQ(plain.Read(every, absl::MakeSpan(a)), looked.Read(every, absl::MakeSpan(b)));
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

// A Lookup keeps its keys in shard order and the caller's rows by position: a push or rebase
// that finds one id of many missing (with and without the step's Lookup) must name that id,
// whichever shard and place it falls in.
TEST(GeoLocalRows, AnErrorNamesTheOneMissingIdAmongMany) {
  std::vector<int64_t> held(500);
  for (size_t i = 0; i < held.size(); ++i) held[i] = static_cast<int64_t>(i) * 7919 + 11;
  for (size_t missing_at : {size_t{0}, size_t{137}, size_t{499}}) {
    LocalRows rows(1, QuarterSgd());
    std::vector<int64_t> keys = held;
    keys.insert(keys.end(), held.begin(), held.end());  // every id twice, as batches repeat
    const int64_t missing_id = -1000003 - static_cast<int64_t>(missing_at);
    keys[missing_at] = missing_id;
    keys[held.size() + missing_at] = missing_id;
    rows.Reset(held, std::vector<float>(held.size(), 1.0f));
    // The error's message, which must contain `expected`.
    auto expect_error = [](auto&& call, const std::string& expected) {
      std::string message = "no error";
      try {
        call();
      } catch (const Internal& e) {
        message = e.what();
      }
      EXPECT_NE(message.find(expected), std::string::npos) << message;
    };
    const std::string id = std::to_string(missing_id);
    const std::vector<float> ones(keys.size(), 1.0f);
    expect_error([&] { rows.Update(keys, ones); }, "GEO push of id " + id + " that was never");
    LocalRows::Lookup lookup;
    std::vector<float> out(keys.size());
    ASSERT_EQ(rows.Read(keys, absl::MakeSpan(out), &lookup),
              (std::vector<size_t>{missing_at, held.size() + missing_at}));
    expect_error([&] { rows.Update(keys, ones, &lookup); },
                 "GEO push of id " + id + " that was never");
    expect_error([&] { rows.Rebase(keys, ones); }, "GEO fresh values of id " + id + " that this");
  }
}

TEST(GeoLocalRows, APushOfAnIdItsReadMissedIsAnErrorUntilTheIdIsPulled) {
  LocalRows rows(1, QuarterSgd());
  rows.Reset({1}, {0.0f});
  LocalRows::Lookup lookup;
  std::vector<float> out(2);
  ASSERT_EQ(rows.Read({1, 2}, absl::MakeSpan(out), &lookup), (std::vector<size_t>{1}));
  EXPECT_THROW(rows.Update({1, 2}, {1.0f, 1.0f}, &lookup), Internal);
  std::vector<float> pulled = {4.0f};
  rows.InsertAbsentOrRead({2}, absl::MakeSpan(pulled));  // as the step's pull inserts what it got
  rows.Update({1, 2}, {1.0f, 1.0f}, &lookup);
  ASSERT_TRUE(rows.Read({1, 2}, absl::MakeSpan(out)).empty());
  EXPECT_EQ(out[1], 3.75f);  // the pulled value, one push on (the refused one never reached it)
}

// An exchange's Lookup also serves a push of exactly its keys (every row once): the same values
// and deltas as a push without it.
TEST(GeoLocalRows, APushWithAnExchangesLookupMatchesOneWithout) {
  LocalRows plain(kDim, Adam()), looked(kDim, Adam());
  std::vector<int64_t> keys;
  for (int64_t id = 0; id < 200; ++id) keys.push_back(id * 104729 - 5000);
  std::vector<float> values(keys.size() * kDim), grads(keys.size() * kDim);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = 0.01f * static_cast<float>(i % 37);
    grads[i] = 0.1f - 0.003f * static_cast<float>(i % 53);
  }
  plain.Reset(keys, values);
  looked.Reset(keys, values);
  plain.Update(keys, grads);
  looked.Update(keys, grads);
  std::vector<int64_t> plain_keys, looked_keys;
  std::vector<float> plain_deltas, looked_deltas;
  LocalRows::Lookup exchange;
  plain.TakeDeltas(1.0f, &plain_keys, &plain_deltas);
  looked.TakeDeltas(1.0f, &looked_keys, &looked_deltas, &exchange);
  ASSERT_EQ(plain_keys, looked_keys);
  std::vector<float> again(looked_keys.size() * kDim);
  for (size_t i = 0; i < again.size(); ++i) again[i] = 0.02f * static_cast<float>(i % 11) - 0.1f;
  plain.Update(plain_keys, again);
  looked.Update(looked_keys, again, &exchange);
  std::vector<float> a(keys.size() * kDim), b(keys.size() * kDim);
  ASSERT_TRUE(plain.Read(keys, absl::MakeSpan(a)).empty());
  ASSERT_TRUE(looked.Read(keys, absl::MakeSpan(b)).empty());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  plain.TakeDeltas(1.0f, &plain_keys, &plain_deltas);
  looked.TakeDeltas(1.0f, &looked_keys, &looked_deltas);
  EXPECT_EQ(plain_keys, looked_keys);
  EXPECT_EQ(0, std::memcmp(plain_deltas.data(), looked_deltas.data(),
                           plain_deltas.size() * sizeof(float)));
}

TEST(GeoLocalRows, AbsentNamesWhatReadMissesAndReusesItsLookup) {
  LocalRows rows(kDim, Adam());
  std::mt19937_64 rng(7);
  std::vector<int64_t> present;
  for (int i = 0; i < 3000; ++i) present.push_back(static_cast<int64_t>(rng() >> 1));
  rows.Reset(present, std::vector<float>(present.size() * kDim, 0.5f));
  LocalRows::Lookup lookup;
  for (int round = 0; round < 3; ++round) {
    // Present and absent ids, each repeated, in a random order, of a different size each round
    // (the Lookup's buffers shrink and grow).
    std::vector<int64_t> keys;
    for (int i = 0; i < 2000 * (round + 1); ++i) {
      keys.push_back(rng() % 3 == 0 ? static_cast<int64_t>(rng() >> 1)
                                    : present[rng() % present.size()]);
      if (rng() % 4 == 0) keys.push_back(keys.back());
    }
    std::vector<float> out(keys.size() * kDim);
    const std::vector<size_t> missed = rows.Read(keys, absl::MakeSpan(out));
    EXPECT_EQ(rows.Absent(keys, &lookup), missed) << "round " << round;
    EXPECT_EQ(rows.Absent(keys), missed) << "round " << round;
    EXPECT_FALSE(missed.empty());
  }
  EXPECT_TRUE(rows.Absent(present).empty());
  EXPECT_TRUE(rows.Absent({}).empty());
}

// GEO's prefetch looks a batch up (Absent) a few steps before the step's Read, which then reuses
// that Lookup: rows inserted in between (the window's pull, another trainer thread) must be found,
// rows still absent reported, and the values, the push through the same Lookup and its deltas
// must be those of a copy read and pushed without Lookups, bit for bit.
TEST(GeoLocalRows, AReadReusingAnEarlierLookupFindsTheRowsInsertedSince) {
  LocalRows plain(kDim, Adam()), looked(kDim, Adam());
  std::mt19937_64 rng(41);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  auto values_for = [&](size_t n) {
    std::vector<float> v(n * kDim);
    for (float& x : v) x = value(rng);
    return v;
  };
  std::vector<int64_t> held;
  for (int i = 0; i < 1500; ++i) held.push_back(static_cast<int64_t>(rng() >> 2));
  const std::vector<float> held_values = values_for(held.size());
  plain.Reset(held, held_values);
  looked.Reset(held, held_values);
  for (int round = 0; round < 4; ++round) {
    // Held ids and new ones (a few repeated), in a random order.
    std::vector<int64_t> keys, fresh;
    for (int i = 0; i < 3000; ++i) {
      if (rng() % 4 == 0) {
        fresh.push_back(static_cast<int64_t>(rng() >> 2));
        keys.push_back(fresh.back());
      } else {
        keys.push_back(held[rng() % held.size()]);
      }
      if (rng() % 5 == 0) keys.push_back(keys.back());
    }
    LocalRows::Lookup lookup;
    const std::vector<size_t> absent_then = looked.Absent(keys, &lookup);
    const std::set<int64_t> new_ids(fresh.begin(), fresh.end());
    const auto is_new = [&](int64_t key) { return new_ids.count(key) > 0; };
    ASSERT_EQ(absent_then.size(),
              static_cast<size_t>(std::count_if(keys.begin(), keys.end(), is_new)));
    // Two thirds of the new ids arrive before the step (a window's pull, another thread's).
    std::vector<int64_t> arrived(fresh.begin(), fresh.begin() + 2 * fresh.size() / 3);
    const std::vector<float> arrived_values = values_for(arrived.size());
    plain.Reset(arrived, arrived_values);
    looked.InsertAbsent(arrived, arrived_values);
    std::vector<float> a(keys.size() * kDim, -7.0f), b(keys.size() * kDim, -7.0f);
    const std::vector<size_t> missing = plain.Read(keys, absl::MakeSpan(a));
    ASSERT_EQ(looked.Read(keys, absl::MakeSpan(b), &lookup), missing) << "round " << round;
    ASSERT_FALSE(missing.empty());
    ASSERT_LT(missing.size(), absent_then.size());
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "round " << round;
    // The step pulls the rest, and pushes through the Read's Lookup.
    std::vector<int64_t> rest;
    for (size_t m : missing) rest.push_back(keys[m]);
    const std::vector<float> rest_values = values_for(rest.size());
    plain.Reset(rest, rest_values);
    looked.Reset(rest, rest_values);
    const std::vector<float> grads = values_for(keys.size());
    plain.Update(keys, grads);
    looked.Update(keys, grads, &lookup);
    const auto plain_deltas = DeltasById(&plain, 0.5f);
    ASSERT_EQ(DeltasById(&looked, 0.5f), plain_deltas) << "round " << round;
    held.insert(held.end(), fresh.begin(), fresh.end());
  }
}

// A Lookup names rows by their number in one LocalRows: another table holding the same keys
// numbers its rows otherwise, so its Read must look them up, not take the other's numbers.
TEST(GeoLocalRows, ALookupOfAnotherTableWithTheSameKeysIsNotUsed) {
  LocalRows first(1, QuarterSgd()), second(1, QuarterSgd());
  const std::vector<int64_t> keys = {101, 202, 303, 404};
  first.Reset(keys, {1.0f, 2.0f, 3.0f, 4.0f});
  // The same keys inserted one by one in the reverse order: other row numbers.
  for (size_t i = keys.size(); i-- > 0;) {
    second.Reset({keys[i]}, {10.0f * static_cast<float>(i + 1)});
  }
  LocalRows::Lookup lookup;
  ASSERT_TRUE(first.Absent(keys, &lookup).empty());
  std::vector<float> out(keys.size());
  ASSERT_TRUE(second.Read(keys, absl::MakeSpan(out), &lookup).empty());
  EXPECT_EQ(out, (std::vector<float>{10.0f, 20.0f, 30.0f, 40.0f}));
  second.Update(keys, {4.0f, 4.0f, 4.0f, 4.0f}, &lookup);
  ASSERT_TRUE(first.Read(keys, absl::MakeSpan(out)).empty());
  EXPECT_EQ(out, (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}));  // untouched
  ASSERT_TRUE(second.Read(keys, absl::MakeSpan(out)).empty());
  EXPECT_EQ(out, (std::vector<float>{9.0f, 19.0f, 29.0f, 39.0f}));
}

// InsertAbsent leaves a present row as it is (value, synced value, rule state, mark); absent ones
// come in as Reset would make them, untouched.
TEST(GeoLocalRows, InsertAbsentKeepsWhatIsPresent) {
  LocalRows rows(1, QuarterSgd());
  rows.Reset({1}, {8.0f});
  rows.Update({1}, {4.0f});  // 7, with a delta of -1 to come
  rows.InsertAbsent({1, 2, 2}, {100.0f, 5.0f, 6.0f});
  std::vector<float> out(2);
  ASSERT_TRUE(rows.Read({1, 2}, absl::MakeSpan(out)).empty());
  EXPECT_EQ(out, (std::vector<float>{7.0f, 5.0f}));  // a repeated absent id: its first value
  EXPECT_EQ(DeltasById(&rows, 1.0f, 1), (std::map<int64_t, std::vector<float>>{{1, {-1.0f}}}));
}

// Two trainer threads miss id 1; the first inserts and trains it; the second's insertion keeps
// that row and hands back its value, and takes what it pulled only for what is still absent.
TEST(GeoLocalRows, InsertAbsentOrReadKeepsAPresentRowAndReadsIt) {
  LocalRows rows(1, QuarterSgd());
  std::vector<float> out(1);
  ASSERT_EQ(rows.Read({1}, absl::MakeSpan(out)), (std::vector<size_t>{0}));
  ASSERT_EQ(rows.Read({1}, absl::MakeSpan(out)), (std::vector<size_t>{0}));
  std::vector<float> first = {8.0f};
  rows.InsertAbsentOrRead({1}, absl::MakeSpan(first));
  EXPECT_EQ(first, (std::vector<float>{8.0f}));
  rows.Update({1}, {4.0f});  // 7, with a delta of -1 to come
  std::vector<float> second = {100.0f, 5.0f, 6.0f};
  rows.InsertAbsentOrRead({1, 2, 2}, absl::MakeSpan(second));
  EXPECT_EQ(second, (std::vector<float>{7.0f, 5.0f, 5.0f}));  // a repeated id reads its first
  std::vector<float> both(2);
  ASSERT_TRUE(rows.Read({1, 2}, absl::MakeSpan(both)).empty());
  EXPECT_EQ(both, (std::vector<float>{7.0f, 5.0f}));
  EXPECT_EQ(DeltasById(&rows, 1.0f, 1), (std::map<int64_t, std::vector<float>>{{1, {-1.0f}}}));
  std::vector<float> short_values(2);
  EXPECT_THROW(rows.InsertAbsentOrRead({3, 4, 5}, absl::MakeSpan(short_values)), InvalidArgument);
}

}  // namespace
}  // namespace fleet::distributed::detail
