// GEO's next-batch row prefetch (distributed/detail/geo_row_prefetch.h) against a real server on
// loopback: it pulls only the rows the announced batch lacks, installs them when that batch asks,
// and never overwrites a row that became present meanwhile (another trainer thread pulled and
// trained it): that row keeps its local value.

#include "distributed/detail/geo_row_prefetch.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/lod_tensor.h"
#include "core/scope.h"
#include "distributed/detail/local_rows.h"
#include "geo_one_sgd_table_fixture.h"

namespace fleet::distributed::detail {
namespace {

class GeoRowPrefetchTest : public testing_geo::OneSgdTableTest {
 protected:
  void SetUp() override {
    OneSgdTableTest::SetUp();
    ASSERT_FALSE(HasFatalFailure());
    SparseVar var;
    var.table_id = kTable;
    var.dim = kDim;
    var.name = "emb";
    var.ids = {"ids"};
    shared_client_ = std::shared_ptr<ps::PsClient>(client_.get(), [](ps::PsClient*) {});
    prefetch_ = std::make_unique<GeoRowPrefetch>(shared_client_, std::vector<SparseVar>{var});
    prefetch_->OnPassBegin(framework::PassInfo(1, true));
  }

  void TearDown() override {
    prefetch_.reset();  // waits for any pull in flight before the client goes
  }

  // Announces the batch of `keys` for thread 0.
  void Announce(const std::vector<int64_t>& keys) {
    LoDTensor* ids = ahead_.Var("ids")->GetMutable<LoDTensor>();
    ids->Resize({static_cast<int64_t>(keys.size()), 1});
    std::copy(keys.begin(), keys.end(), ids->mutable_data<int64_t>());
    framework::StepInfo next;
    next.thread = 0;
    next.scope = &ahead_;
    prefetch_->OnBatchAhead(next);
  }

  // Pushes `grads` to the server (so its values differ from a fresh row's zeros).
  void PushToServer(const std::vector<int64_t>& keys, const std::vector<float>& grads) {
    ASSERT_TRUE(client_->PushSparse(kTable, keys, grads).Wait().ok());
  }

  std::shared_ptr<ps::PsClient> shared_client_;
  std::unique_ptr<GeoRowPrefetch> prefetch_;
  Scope ahead_;
};

TEST_F(GeoRowPrefetchTest, InstallsTheAbsentRowsOfTheAnnouncedBatchOnly) {
  PushToServer({10, 11, 12}, {-1, -2, -3, -4, -5, -6});              // server rows 10: (1, 2) ...
  local_.Reset(std::vector<int64_t>{10}, std::vector<float>{7, 8});  // held locally already
  Announce({10, 11, 12, 11});
  prefetch_->Start(0, kTable, local_, /*pulled_at_step=*/false);
  const std::vector<int64_t> batch = {10, 11, 12, 11};
  prefetch_->Install(0, kTable, batch, local_, "emb");
  EXPECT_EQ(prefetch_->served(), 1);
  std::vector<float> out(batch.size() * kDim, -99);
  EXPECT_TRUE(local_.Read(batch, absl::MakeSpan(out)).empty());
  // Row 10 kept its local value; 11 and 12 have the server's.
  EXPECT_EQ(out, (std::vector<float>{7, 8, 3, 4, 5, 6, 3, 4}));
}

TEST_F(GeoRowPrefetchTest, ARowPulledAndTrainedMeanwhileKeepsItsLocalValue) {
  PushToServer({20, 21}, {-1, -1, -2, -2});  // server rows 20: (1, 1), 21: (2, 2)
  Announce({20, 21});
  prefetch_->Start(0, kTable, local_, false);
  // Another trainer thread pulls row 21 and trains it before this batch's step.
  local_.Reset(std::vector<int64_t>{21}, std::vector<float>{2, 2});
  local_.Update(std::vector<int64_t>{21}, std::vector<float>{0.5f, 0.25f});
  prefetch_->Install(0, kTable, std::vector<int64_t>{20, 21}, local_, "emb");
  std::vector<float> out(2 * kDim);
  ASSERT_TRUE(local_.Read(std::vector<int64_t>{20, 21}, absl::MakeSpan(out)).empty());
  EXPECT_EQ(out, (std::vector<float>{1, 1, 1.5f, 1.75f}));
  // And its delta for the next exchange is still there: 21 was trained, 20 was not.
  std::vector<int64_t> keys;
  std::vector<float> deltas;
  local_.TakeDeltas(1.0f, &keys, &deltas);
  EXPECT_EQ(keys, std::vector<int64_t>{21});
  EXPECT_EQ(deltas, (std::vector<float>{-0.5f, -0.25f}));
}

TEST_F(GeoRowPrefetchTest, APullOfOtherKeysIsNotServedAndLeavesTheRowsAbsent) {
  Announce({30, 31});
  prefetch_->Start(0, kTable, local_, false);
  prefetch_->Install(0, kTable, std::vector<int64_t>{30}, local_, "emb");  // another batch
  EXPECT_EQ(prefetch_->served(), 0);
  std::vector<float> out(2 * kDim);
  EXPECT_EQ(local_.Read(std::vector<int64_t>{30, 31}, absl::MakeSpan(out)).size(), 2u);
  // The next Start drops that prefetch (waiting for it) and starts the newly announced one.
  Announce({31});
  prefetch_->Start(0, kTable, local_, true);
  prefetch_->Install(0, kTable, std::vector<int64_t>{31}, local_, "emb");
  EXPECT_EQ(prefetch_->served(), 1);
  EXPECT_EQ(prefetch_->pulled_at_step(), 1);
  EXPECT_TRUE(local_.Read(std::vector<int64_t>{31}, absl::MakeSpan(out).first(kDim)).empty());
}

TEST_F(GeoRowPrefetchTest, OnePullCoversTheNewRowsOfAWindowOfBatches) {
  PushToServer({61, 62, 63}, {-1, -1, -2, -2, -3, -3});  // server rows 61: (1, 1) ... 63: (3, 3)
  local_.Reset(std::vector<int64_t>{60}, std::vector<float>{7, 8});
  const std::vector<std::vector<int64_t>> batches = {{60, 61}, {61, 62}, {63, 62}};
  for (const auto& batch : batches) Announce(batch);
  prefetch_->Start(0, kTable, local_, /*pulled_at_step=*/true);
  EXPECT_EQ(prefetch_->window_pulls(), 1);
  // The window's first batch installs every absent row of the window: 61, 62 and 63 once each.
  prefetch_->Install(0, kTable, batches[0], local_, "emb");
  std::vector<float> out(3 * kDim);
  ASSERT_TRUE(local_.Read(std::vector<int64_t>{61, 62, 63}, absl::MakeSpan(out)).empty());
  EXPECT_EQ(out, (std::vector<float>{1, 1, 2, 2, 3, 3}));
  // The step trains row 62; the window's later batches are served without pulling again and
  // leave the trained row as it is.
  local_.Update(std::vector<int64_t>{62}, std::vector<float>{0.5f, 0.25f});
  for (size_t b = 1; b < batches.size(); ++b) {
    prefetch_->Start(0, kTable, local_, false);
    prefetch_->Install(0, kTable, batches[b], local_, "emb");
  }
  prefetch_->Start(0, kTable, local_, false);  // nothing announced: no pull
  EXPECT_EQ(prefetch_->served(), 3);
  EXPECT_EQ(prefetch_->window_pulls(), 1);
  ASSERT_TRUE(local_.Read(std::vector<int64_t>{60, 62}, absl::MakeSpan(out).first(4)).empty());
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 4),
            (std::vector<float>{7, 8, 1.5f, 1.75f}));
  // Rows inserted for later batches are not pushed at the next exchange until trained.
  std::vector<int64_t> keys;
  std::vector<float> deltas;
  local_.TakeDeltas(1.0f, &keys, &deltas);
  EXPECT_EQ(keys, std::vector<int64_t>{62});
}

TEST_F(GeoRowPrefetchTest, AStepThatAsksForOtherKeysEndsTheWindow) {
  Announce({70});
  Announce({71});
  prefetch_->Start(0, kTable, local_, true);
  prefetch_->Install(0, kTable, std::vector<int64_t>{70}, local_, "emb");
  prefetch_->Start(0, kTable, local_, false);  // the window's next batch is still to come
  EXPECT_EQ(prefetch_->window_pulls(), 1);
  // A step of other keys: the window's batches no longer come in order.
  prefetch_->Install(0, kTable, std::vector<int64_t>{72}, local_, "emb");
  EXPECT_EQ(prefetch_->served(), 1);
  Announce({73});
  prefetch_->Start(0, kTable, local_, true);
  EXPECT_EQ(prefetch_->window_pulls(), 2);
  prefetch_->Install(0, kTable, std::vector<int64_t>{71}, local_, "emb");  // the old window's
  EXPECT_EQ(prefetch_->served(), 1);
  prefetch_->Install(0, kTable, std::vector<int64_t>{73}, local_, "emb");
  EXPECT_EQ(prefetch_->served(), 2);
  std::vector<float> out(kDim);
  EXPECT_TRUE(local_.Read(std::vector<int64_t>{73}, absl::MakeSpan(out)).empty());
  EXPECT_EQ(local_.Read(std::vector<int64_t>{72}, absl::MakeSpan(out)).size(), 1u);
}

TEST_F(GeoRowPrefetchTest, OutsideADatasetPassNothingIsPrefetched) {
  prefetch_->OnPassEnd();
  Announce({40});
  prefetch_->Start(0, kTable, local_, true);
  prefetch_->Install(0, kTable, std::vector<int64_t>{40}, local_, "emb");
  EXPECT_EQ(prefetch_->served(), 0);
  EXPECT_EQ(prefetch_->pulled_at_step(), 0);
  std::vector<float> out(kDim);
  EXPECT_EQ(local_.Read(std::vector<int64_t>{40}, absl::MakeSpan(out)).size(), 1u);
}

TEST_F(GeoRowPrefetchTest, AFailedPrefetchIsThrownAtTheStepNamingItsTable) {
  // A table the server does not have: the prefetch's pull fails, and the step that would have
  // used it gets the error, naming what was prefetched, instead of rows that never came.
  SparseVar ghost;
  ghost.table_id = 99;
  ghost.dim = kDim;
  ghost.name = "ghost";
  ghost.ids = {"ids"};
  GeoRowPrefetch prefetch(shared_client_, {ghost});
  prefetch.OnPassBegin(framework::PassInfo(1, true));
  LoDTensor* ids = ahead_.Var("ids")->GetMutable<LoDTensor>();
  ids->Resize({1, 1});
  ids->mutable_data<int64_t>()[0] = 50;
  framework::StepInfo next;
  next.thread = 0;
  next.scope = &ahead_;
  prefetch.OnBatchAhead(next);
  prefetch.Start(0, ghost.table_id, local_, false);
  try {
    prefetch.Install(0, ghost.table_id, std::vector<int64_t>{50}, local_, "ghost");
    FAIL() << "a prefetch whose pull failed was installed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("GEO prefetch of the coming batches' new rows of 'ghost'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(prefetch.served(), 0);
  std::vector<float> out(kDim);
  EXPECT_EQ(local_.Read(std::vector<int64_t>{50}, absl::MakeSpan(out)).size(), 1u);
}

// The step's Read reuses the Lookup Start took of its batch: the rows inserted since (the
// window's own pull at its first batch, a row another trainer thread pulled and trained) must be
// read with the values they have now, and the push through that Lookup must reach them.
TEST_F(GeoRowPrefetchTest, AStepReadsThroughTheLookupTakenAtStart) {
  PushToServer({80, 81, 82}, {-1, -1, -2, -2, -3, -3});  // server rows 80: (1, 1) ... 82: (3, 3)
  local_.Reset(std::vector<int64_t>{79}, std::vector<float>{7, 8});
  const std::vector<std::vector<int64_t>> batches = {{79, 80}, {81, 79, 82}};
  for (const auto& batch : batches) Announce(batch);
  prefetch_->Start(0, kTable, local_, true);
  // Another trainer thread pulls row 82 and trains it before the window's first batch.
  local_.Reset(std::vector<int64_t>{82}, std::vector<float>{3, 3});
  local_.Update(std::vector<int64_t>{82}, std::vector<float>{0.5f, 0.25f});
  LocalRows::Lookup step;
  std::vector<float> expected[] = {{7, 8, 1, 1}, {2, 2, 6, 7, 2.5f, 2.75f}};
  for (size_t b = 0; b < batches.size(); ++b) {
    if (b > 0) prefetch_->Start(0, kTable, local_, false);
    prefetch_->Install(0, kTable, batches[b], local_, "emb", &step);
    std::vector<float> out(batches[b].size() * kDim, -99);
    ASSERT_TRUE(local_.Read(batches[b], absl::MakeSpan(out), &step).empty()) << "batch " << b;
    EXPECT_EQ(out, expected[b]) << "batch " << b;
    local_.Update(batches[b], std::vector<float>(out.size(), 1.0f), &step);
  }
  EXPECT_EQ(prefetch_->served(), 2);
  std::vector<float> out(4 * kDim);
  ASSERT_TRUE(local_.Read(std::vector<int64_t>{79, 80, 81, 82}, absl::MakeSpan(out)).empty());
  EXPECT_EQ(out, (std::vector<float>{5, 6, 0, 0, 1, 1, 1.5f, 1.75f}));
}

}  // namespace
}  // namespace fleet::distributed::detail
