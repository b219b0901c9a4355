// The SSD tier of a sparse table (ps/table/ssd/tier.h), without RPC: an "ssd" table under a
// budget far below its size must answer every pull exactly as an in-memory table given the same
// pushes, while its rows move between memory and RocksDB; checkpoints of either kind load into
// either; shrink reaches the rows on disk; bad paths and budgets are refused at once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ps/table/sparse_table.h"
#include "ps/table/ssd/tier.h"

namespace fleet::ps {
namespace {

#ifdef FLEET_HAVE_ROCKSDB

constexpr uint32_t kDim = 8;
constexpr uint32_t kShards = 4;

// A fresh directory under the test's temporary directory, removed at the end.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base ? base : "/tmp") + "/fleet_ssd_test_XXXXXX";
    path_ = mkdtemp(templ.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

proto::TableConfig Config(uint32_t table_id, const std::string& storage, double budget_mb,
                          const std::string& ssd_path) {
  proto::TableConfig config;
  config.set_table_id(table_id);
  config.set_name("emb");
  config.set_type(proto::SPARSE);
  config.set_dim(kDim);
  config.set_num_shards(kShards);
  config.mutable_optimizer()->set_learning_rate(0.1f);
  config.mutable_optimizer()->mutable_adagrad();
  config.mutable_initializer()->set_seed(7);
  config.mutable_initializer()->mutable_uniform()->set_low(-0.5f);
  config.mutable_initializer()->mutable_uniform()->set_high(0.5f);
  config.set_storage(storage);
  config.set_memory_budget_mb(budget_mb);
  config.set_ssd_path(ssd_path);
  return config;
}

std::unique_ptr<SparseTable> MustCreate(const proto::TableConfig& config) {
  auto table = SparseTable::Create(config);
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? std::move(*table) : nullptr;
}

// 0.05 MiB: about 380 rows of dim 8 with Adagrad in memory, against thousands in the table.
constexpr double kSmallBudgetMb = 0.05;

// Pulls `keys` in requests of at most 64 keys (an SSD table refuses a request whose rows
// cannot all be in its memory at once).
std::vector<float> Pull(SparseTable& table, const std::vector<int64_t>& keys) {
  std::vector<float> out(keys.size() * kDim);
  for (size_t first = 0; first < keys.size(); first += 64) {
    const size_t n = std::min<size_t>(64, keys.size() - first);
    const absl::Status status = table.Pull(absl::MakeConstSpan(keys).subspan(first, n),
                                           absl::MakeSpan(out).subspan(first * kDim, n * kDim));
    EXPECT_TRUE(status.ok()) << status;
  }
  return out;
}

// Batches of `batch` keys drawn from `universe` keys, skewed toward small keys as CTR ids are.
std::vector<int64_t> Batch(std::mt19937_64& rng, int universe, int batch) {
  std::vector<int64_t> keys(batch);
  std::uniform_real_distribution<double> u(0, 1);
  for (auto& k : keys) k = static_cast<int64_t>(universe * u(rng) * u(rng)) - universe / 3;
  return keys;
}

// Pulls and pushes the same batches on both tables; every pull must match exactly.
void RunSameSteps(SparseTable& memory, SparseTable& ssd, int steps, int universe, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> grad(0, 1);
  for (int step = 0; step < steps; ++step) {
    const std::vector<int64_t> keys = Batch(rng, universe, 64);
    ASSERT_EQ(Pull(memory, keys), Pull(ssd, keys)) << "step " << step;
    std::vector<float> grads(keys.size() * kDim);
    for (float& g : grads) g = grad(rng);
    ASSERT_TRUE(memory.Push(keys, grads, false).ok());
    ASSERT_TRUE(ssd.Push(keys, grads, false).ok());
  }
}

std::vector<int64_t> Range(int64_t first, int64_t last) {
  std::vector<int64_t> keys;
  for (int64_t k = first; k < last; ++k) keys.push_back(k);
  return keys;
}

TEST(SsdTierTest, PullsAndPushesMatchAnInMemoryTableWhileRowsMoveToDiskAndBack) {
  TempDir dir;
  auto memory = MustCreate(Config(1, "", 0, ""));
  auto ssd = MustCreate(Config(1, "ssd", kSmallBudgetMb, dir.path()));
  ASSERT_TRUE(memory && ssd);
  RunSameSteps(*memory, *ssd, 400, 6000, 1);
  // Every row the memory table has, read back from the SSD table (most from disk).
  const std::vector<int64_t> all = Range(-2000, 4000);
  EXPECT_EQ(Pull(*memory, all), Pull(*ssd, all));
  const proto::TableStats stats = ssd->Stats();
  ASSERT_TRUE(stats.has_ssd());
  EXPECT_GT(stats.ssd().rows_on_disk(), stats.ssd().rows_in_memory());
  EXPECT_GT(stats.ssd().evictions(), 0u);
  EXPECT_GT(stats.ssd().disk_reads(), 0u);
  EXPECT_GT(stats.ssd().bytes_written(), 0u);
  EXPECT_GT(stats.ssd().bytes_read(), 0u);
  EXPECT_EQ(stats.rows(), memory->RowCount());
  EXPECT_EQ(ssd->RowCount(), memory->RowCount());
}

TEST(SsdTierTest, MemoryStaysUnderTheBudget) {
  TempDir dir;
  auto ssd = MustCreate(Config(1, "ssd", kSmallBudgetMb, dir.path()));
  ASSERT_TRUE(ssd);
  const uint64_t capacity = static_cast<uint64_t>(kSmallBudgetMb * (1 << 20)) / 4 * 3 /
                            ssd::Tier::BytesPerRow(kDim * 2) / kShards;
  std::mt19937_64 rng(2);
  for (int step = 0; step < 200; ++step) {
    const std::vector<int64_t> keys = Batch(rng, 20000, 64);
    Pull(*ssd, keys);
    ASSERT_LE(ssd->Stats().ssd().rows_in_memory(), capacity * kShards) << "step " << step;
  }
  EXPECT_GT(ssd->Stats().ssd().rows_on_disk(), 0u);
}

TEST(SsdTierTest, HotRowsStayInMemory) {
  TempDir dir;
  auto ssd = MustCreate(Config(1, "ssd", kSmallBudgetMb, dir.path()));
  ASSERT_TRUE(ssd);
  const std::vector<int64_t> hot = Range(0, 8);
  std::mt19937_64 rng(3);
  for (int step = 0; step < 100; ++step) {
    Pull(*ssd, hot);
    Pull(*ssd, Range(1000 + step * 64, 1000 + step * 64 + 64));  // cold: seen once each
  }
  const uint64_t reads_before = ssd->Stats().ssd().disk_reads();
  Pull(*ssd, hot);
  EXPECT_EQ(ssd->Stats().ssd().disk_reads(), reads_before);  // every hot row was in memory
  Pull(*ssd, Range(1000, 1064));  // the first cold batch went to disk long ago
  EXPECT_GT(ssd->Stats().ssd().disk_reads(), reads_before);
}

TEST(SsdTierTest, OftenPulledRowsOutlastAStreamOfRowsSeenOnce) {
  // Rows pulled 16 times, then not at all while 100 requests bring 6400 rows seen once each
  // (the budget holds about 380): ranked by recency they would all have gone to disk; ranked by
  // show count first, the rows seen once go instead.
  TempDir dir;
  auto ssd = MustCreate(Config(1, "ssd", kSmallBudgetMb, dir.path()));
  ASSERT_TRUE(ssd);
  const std::vector<int64_t> often = Range(0, 8);
  for (int i = 0; i < 16; ++i) Pull(*ssd, often);
  for (int step = 0; step < 100; ++step) Pull(*ssd, Range(1000 + step * 64, 1064 + step * 64));
  ASSERT_GT(ssd->Stats().ssd().rows_on_disk(), 5000u);
  const uint64_t reads_before = ssd->Stats().ssd().disk_reads();
  Pull(*ssd, often);
  EXPECT_EQ(ssd->Stats().ssd().disk_reads(), reads_before);  // all 8 were still in memory
}

// Pulls keys [0, n) in batches small enough for the budget.
void PullAll(SparseTable& table, int n) {
  for (int first = 0; first < n; first += 64) Pull(table, Range(first, std::min(n, first + 64)));
}

TEST(SsdTierTest, EvictingARowNoPushChangedWritesNothing) {
  TempDir dir, files;
  auto ssd = MustCreate(Config(1, "ssd", kSmallBudgetMb, dir.path()));
  ASSERT_TRUE(ssd);
  // Two passes: every row has been written to disk once and promoted since.
  PullAll(*ssd, 3000);
  PullAll(*ssd, 3000);
  const uint64_t written = ssd->Stats().ssd().bytes_written();
  const uint64_t reads = ssd->Stats().ssd().disk_reads();
  PullAll(*ssd, 3000);  // rows move to memory and back, unchanged
  EXPECT_GT(ssd->Stats().ssd().disk_reads(), reads);
  EXPECT_EQ(ssd->Stats().ssd().bytes_written(), written);
  // A push makes a row's disk copy stale: evicted, the row is written again, and a save still
  // holds each row once.
  for (int first = 0; first < 3000; first += 64) {
    const std::vector<int64_t> keys = Range(first, std::min(3000, first + 64));
    ASSERT_TRUE(ssd->Push(keys, std::vector<float>(keys.size() * kDim, 0.5f), false).ok());
  }
  EXPECT_GT(ssd->Stats().ssd().bytes_written(), written);
  auto rows = ssd->Save(files.path() + "/p", proto::BASE);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(*rows, 3000u);
  EXPECT_EQ(ssd->RowCount(), 3000u);
}

TEST(SsdTierTest, ConcurrentDeltaPushesToRowsOnDiskLoseNothing) {
  TempDir dir;
  proto::TableConfig config = Config(1, "ssd", kSmallBudgetMb, dir.path());
  config.mutable_initializer()->mutable_zero();
  auto ssd = MustCreate(config);
  ASSERT_TRUE(ssd);
  constexpr int kThreads = 4, kRounds = 20;
  const std::vector<int64_t> keys = Range(0, 2048);  // five times what memory holds
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      const std::vector<float> ones(64 * kDim, 1.0f);
      for (int round = 0; round < kRounds; ++round) {
        for (size_t first = 0; first < keys.size(); first += 64) {
          std::vector<int64_t> batch(keys.begin() + first, keys.begin() + first + 64);
          ASSERT_TRUE(ssd->Push(batch, ones, true).ok());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GT(ssd->Stats().ssd().rows_on_disk(), 0u);
  const std::vector<float> values = Pull(*ssd, keys);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(values[i], kThreads * kRounds) << "key " << keys[i / kDim];
  }
}

// Saves `from` (BASE, then a DELTA after more pushes) and loads both parts into `into`.
void SaveAndLoad(SparseTable& from, SparseTable& into, const std::string& dir) {
  const std::string base = dir + "/base.part", delta = dir + "/delta.part";
  auto rows = from.Save(base, proto::BASE);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(*rows, from.RowCount());
  const std::vector<int64_t> keys = Range(10, 200);
  ASSERT_TRUE(from.Push(keys, std::vector<float>(keys.size() * kDim, 0.25f), false).ok());
  auto delta_rows = from.Save(delta, proto::DELTA);
  ASSERT_TRUE(delta_rows.ok()) << delta_rows.status();
  EXPECT_EQ(*delta_rows, keys.size());
  auto base_part = TableFileReader::Open(base);
  auto delta_part = TableFileReader::Open(delta);
  ASSERT_TRUE(base_part.ok() && delta_part.ok());
  std::vector<TableFileReader*> parts = {base_part->get(), delta_part->get()};
  auto loaded = into.Load(parts);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
}

TEST(SsdTierTest, CheckpointsOfEitherKindLoadIntoEither) {
  TempDir dir, files;
  for (const bool from_ssd : {true, false}) {
    for (const bool into_ssd : {true, false}) {
      SCOPED_TRACE(std::string(from_ssd ? "ssd" : "memory") + " -> " +
                   (into_ssd ? "ssd" : "memory"));
      std::filesystem::remove_all(dir.path() + "/a");
      std::filesystem::remove_all(dir.path() + "/b");
      auto reference = MustCreate(Config(1, "", 0, ""));
      auto from = MustCreate(from_ssd ? Config(1, "ssd", kSmallBudgetMb, dir.path() + "/a")
                                      : Config(1, "", 0, ""));
      auto into = MustCreate(into_ssd ? Config(1, "ssd", kSmallBudgetMb, dir.path() + "/b")
                                      : Config(1, "", 0, ""));
      ASSERT_TRUE(reference && from && into);
      RunSameSteps(*reference, *from, 150, 5000, 4);
      SaveAndLoad(*from, *into, files.path());
      ASSERT_TRUE(
          reference->Push(Range(10, 200), std::vector<float>(190 * kDim, 0.25f), false).ok());
      EXPECT_EQ(into->RowCount(), reference->RowCount());
      const std::vector<int64_t> all = Range(-2000, 4000);
      EXPECT_EQ(Pull(*reference, all), Pull(*into, all));
    }
  }
}

TEST(SsdTierTest, ShrinkDropsStaleRowsOnDiskToo) {
  TempDir dir, files;
  auto ssd = MustCreate(Config(1, "ssd", kSmallBudgetMb, dir.path()));
  ASSERT_TRUE(ssd);
  Pull(*ssd, Range(0, 3000));                                     // most of them go to disk
  ASSERT_TRUE(ssd->Save(files.path() + "/p", proto::BASE).ok());  // ends the save cycle
  ASSERT_GT(ssd->Stats().ssd().rows_on_disk(), 0u);
  const std::vector<int64_t> kept = Range(0, 100);
  ASSERT_TRUE(ssd->Push(kept, std::vector<float>(kept.size() * kDim, 0.5f), false).ok());
  const uint64_t removed = ssd->Shrink(0);
  EXPECT_EQ(removed, 2900u);
  EXPECT_EQ(ssd->RowCount(), 100u);
  EXPECT_EQ(ssd->Stats().ssd().rows_on_disk() + ssd->Stats().ssd().rows_in_memory(), 100u);
}

TEST(SsdTierTest, RefusesAPathThatCannotBeWritten) {
  TempDir dir;
  const std::string file = dir.path() + "/a_file";
  std::fclose(std::fopen(file.c_str(), "w"));
  auto table = SparseTable::Create(Config(1, "ssd", 1, file + "/db"));
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(table.status().message().find(file + "/db"), std::string::npos) << table.status();
}

TEST(SsdTierTest, RefusesADatabaseOfAnotherTableOrDim) {
  TempDir dir;
  { ASSERT_TRUE(MustCreate(Config(1, "ssd", 1, dir.path()))); }
  // The same table again: its database is reused (emptied).
  { ASSERT_TRUE(MustCreate(Config(1, "ssd", 1, dir.path()))); }
  auto other = SparseTable::Create(Config(2, "ssd", 1, dir.path()));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find(dir.path()), std::string::npos) << other.status();
  proto::TableConfig wider = Config(1, "ssd", 1, dir.path());
  wider.set_dim(16);
  auto wide = SparseTable::Create(wider);
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("dim 16"), std::string::npos) << wide.status();
}

TEST(SsdTierTest, RefusesABudgetTooSmallForOneRequest) {
  TempDir dir;
  auto tiny = SparseTable::Create(Config(1, "ssd", 0.0001, dir.path()));
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("memory_budget_mb 0.0001"), std::string::npos)
      << tiny.status();
  auto ssd = MustCreate(Config(1, "ssd", kSmallBudgetMb, dir.path()));
  ASSERT_TRUE(ssd);
  const std::vector<int64_t> keys = Range(0, 4000);  // ~1000 a shard, ~96 fit
  std::vector<float> out(keys.size() * kDim);
  const absl::Status status = ssd->Pull(keys, absl::MakeSpan(out));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("memory_budget_mb 0.05"), std::string::npos) << status;
  EXPECT_EQ(ssd->RowCount(), 0u);  // refused before any change
  // Repeats need no row of their own: 4000 keys of which 40 distinct fit.
  std::vector<int64_t> repeats;
  for (int i = 0; i < 4000; ++i) repeats.push_back(i % 40);
  EXPECT_TRUE(ssd->Pull(repeats, absl::MakeSpan(out)).ok());
  EXPECT_EQ(ssd->RowCount(), 40u);
}

TEST(SsdTierTest, RefusesAnUnknownStorageOrAMissingPath) {
  auto bad = SparseTable::Create(Config(1, "disk", 1, "/tmp"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"disk\""), std::string::npos) << bad.status();
  auto no_path = SparseTable::Create(Config(1, "ssd", 1, ""));
  ASSERT_FALSE(no_path.ok());
  EXPECT_NE(no_path.status().message().find("ssd_path"), std::string::npos) << no_path.status();
}

#else  // a build without RocksDB

TEST(SsdTierTest, IsRefusedNamingTheMissingLibrary) {
  proto::TableConfig config;
  config.set_table_id(1);
  config.set_type(proto::SPARSE);
  config.set_dim(8);
  config.mutable_optimizer()->set_learning_rate(0.1f);
  config.mutable_optimizer()->mutable_sgd();
  config.set_storage("ssd");
  config.set_memory_budget_mb(1);
  config.set_ssd_path("/tmp/fleet_ssd_unbuilt");
  auto table = SparseTable::Create(config);
  ASSERT_FALSE(table.ok());
  EXPECT_NE(table.status().message().find("librocksdb-dev"), std::string::npos) << table.status();
}

#endif

}  // namespace
}  // namespace fleet::ps
