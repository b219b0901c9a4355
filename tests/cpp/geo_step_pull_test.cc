// GEO's step pull of the rows a Read missed (PullMissingRows, geo_communicator.h) against a real
// server on loopback. The race it closes needs two trainer threads of one worker that both miss
// a new id: the second thread's step is run inside the first one's pull (after its reply came,
// before its rows are inserted), which is that window without any timing.

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "distributed/detail/geo_communicator.h"
#include "distributed/detail/local_rows.h"
#include "geo_one_sgd_table_fixture.h"

namespace fleet::distributed::detail {
namespace {

class GeoStepPullTest : public testing_geo::OneSgdTableTest {
 protected:
  void SetUp() override {
    OneSgdTableTest::SetUp();
    ASSERT_FALSE(HasFatalFailure());
    // The server's rows 7 and 8 become {-1, -2} and {-3, -4}, unlike a new row's zeros.
    ASSERT_TRUE(client_->PushSparse(kTable, {7, 8}, {1.0f, 2.0f, 3.0f, 4.0f}).Wait().ok());
  }

  // A real pull of `keys` from the server.
  void PullFromServer(absl::Span<const int64_t> keys, absl::Span<float> rows) {
    ASSERT_TRUE(client_->PullSparse(kTable, keys, rows).Wait().ok());
  }

  // One trainer thread's pull of `keys` as GeoCommunicator::PullSparse does it (a Read, then the
  // pull of what it missed), with `meanwhile` run after the server's reply, before the insertion.
  template <class Meanwhile>
  std::vector<float> StepPull(const std::vector<int64_t>& keys, LocalRows::Lookup* lookup,
                              Meanwhile&& meanwhile) {
    std::vector<float> out(keys.size() * kDim);
    const std::vector<size_t> missing = local_.Read(keys, absl::MakeSpan(out), lookup);
    PullMissingRows(local_, kDim, keys, missing, absl::MakeSpan(out),
                    [&](absl::Span<const int64_t> absent, absl::Span<float> rows) {
                      PullFromServer(absent, rows);
                      meanwhile();
                    });
    return out;
  }
};

TEST_F(GeoStepPullTest, ARowAnotherThreadTrainedWhileThePullWasInFlightIsKeptAndRead) {
  LocalRows::Lookup first_lookup, second_lookup;
  // The first thread misses 7 and 8; while its pull is in flight the second thread misses 7 too,
  // pulls it, inserts it and trains it (7: {-1, -2} - {0.5, 0.25}).
  const std::vector<float> first = StepPull({7, 8}, &first_lookup, [&] {
    const std::vector<float> second = StepPull({7}, &second_lookup, [] {});
    EXPECT_EQ(second, (std::vector<float>{-1.0f, -2.0f}));
    local_.Update({7}, {0.5f, 0.25f}, &second_lookup);
  });
  // The first thread reads 7 as trained (its reply's {-1, -2} is older) and 8 as pulled.
  EXPECT_EQ(first, (std::vector<float>{-1.5f, -2.25f, -3.0f, -4.0f}));
  std::vector<float> now(4);
  ASSERT_TRUE(local_.Read({7, 8}, absl::MakeSpan(now)).empty());
  EXPECT_EQ(now, first);
  // Its push lands on top, and the exchange carries both threads' updates of 7.
  local_.Update({7, 8}, {1.0f, 1.0f, 2.0f, 2.0f}, &first_lookup);
  std::vector<int64_t> keys;
  std::vector<float> deltas;
  local_.TakeDeltas(1.0f, &keys, &deltas);
  ASSERT_EQ(keys.size(), 2u);
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::vector<float> row(deltas.begin() + i * kDim, deltas.begin() + (i + 1) * kDim);
    const std::vector<float> expected =
        keys[i] == 7 ? std::vector<float>{-1.5f, -1.25f} : std::vector<float>{-2.0f, -2.0f};
    EXPECT_EQ(row, expected) << "id " << keys[i];
  }
}

TEST_F(GeoStepPullTest, AloneTheStepReadsAndInsertsWhatTheServerSent) {
  // Repeated ids among the missed ones: each position gets the row, which is inserted once with
  // the server's value as value and synced value (nothing to exchange).
  LocalRows::Lookup lookup;
  const std::vector<float> out = StepPull({8, 5, 8, 7}, &lookup, [] {});
  EXPECT_EQ(out, (std::vector<float>{-3.0f, -4.0f, 0.0f, 0.0f, -3.0f, -4.0f, -1.0f, -2.0f}));
  std::vector<float> now(out.size());
  ASSERT_TRUE(local_.Read({8, 5, 8, 7}, absl::MakeSpan(now)).empty());
  EXPECT_EQ(now, out);
  std::vector<int64_t> keys;
  std::vector<float> deltas;
  local_.TakeDeltas(1.0f, &keys, &deltas);
  EXPECT_TRUE(keys.empty());
}

}  // namespace
}  // namespace fleet::distributed::detail
