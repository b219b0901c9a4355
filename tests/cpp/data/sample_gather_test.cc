// Gathering samples into batches: SampleBlock::AppendRows (slot by slot, runs of consecutive
// rows copied in one piece) must build exactly what AppendFrom builds sample by sample, and an
// in-memory pass must hand out every loaded sample once, in its batch, across file blocks.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "data/channel.h"
#include "data/dataset.h"
#include "data/slots.h"

namespace fleet::data {
namespace {

// A tensor's elements, for comparing a whole column at once.
template <typename T>
std::vector<T> ValuesOf(const LoDTensor& tensor) {
  return std::vector<T>(tensor.data<T>(), tensor.data<T>() + tensor.numel());
}

// ids: LoD int64; w: dense float32 [-1, 3]; weights: LoD float32; label: dense int64 [-1, 1].
std::vector<SlotSpec> GatherSlots() {
  return {MakeSlotSpec("ids", DType::kInt64, 1, {-1, 1}),
          MakeSlotSpec("w", DType::kFloat32, 0, {-1, 3}),
          MakeSlotSpec("weights", DType::kFloat32, 1, {-1, 1}),
          MakeSlotSpec("label", DType::kInt64, 0, {-1, 1})};
}

// A block of `samples` random samples; LoD slots hold 1 to 5 values a sample (runs of them
// copied in one piece go through memcpy, single short samples through the plain loop).
SampleBlock RandomBlock(const std::vector<SlotSpec>* slots, size_t samples, std::mt19937* rng) {
  SampleBlock block(slots);
  for (size_t s = 0; s < samples; ++s) {
    for (size_t i = 0; i < slots->size(); ++i) {
      const SlotSpec& slot = (*slots)[i];
      SlotColumn& c = block.column(i);
      size_t n = slot.dense ? static_cast<size_t>(slot.width) : 1 + (*rng)() % 5;
      for (size_t j = 0; j < n; ++j) {
        if (slot.type == SlotType::kInt64) {
          c.ids.push_back(static_cast<int64_t>((*rng)()) - (1LL << 31));
        } else {
          c.values.push_back(static_cast<float>((*rng)() % 100000) / 7.0f);
        }
      }
      if (!slot.dense)
        c.offsets.push_back(slot.type == SlotType::kInt64 ? c.ids.size() : c.values.size());
    }
    block.CommitSample();
  }
  return block;
}

void ExpectSameColumns(const SampleBlock& got, const SampleBlock& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.slots().size(); ++i) {
    SCOPED_TRACE(want.slots()[i].name);
    EXPECT_EQ(got.column(i).ids, want.column(i).ids);
    EXPECT_EQ(got.column(i).values, want.column(i).values);
    EXPECT_EQ(got.column(i).offsets, want.column(i).offsets);
  }
}

TEST(SampleGather, AppendRowsBuildsWhatAppendFromBuildsRowByRow) {
  const std::vector<SlotSpec> slots = GatherSlots();
  std::mt19937 rng(11);
  const SampleBlock a = RandomBlock(&slots, 40, &rng);
  const SampleBlock b = RandomBlock(&slots, 25, &rng);
  // Long runs (a's rows 3..20, b's rows 0..24 then a's tail), a run broken by a repeated row,
  // single rows alternating between the blocks, and rows in reverse.
  std::vector<SampleRow> rows;
  for (size_t r = 3; r < 21; ++r) rows.push_back({&a, r});
  for (size_t r = 0; r < 25; ++r) rows.push_back({&b, r});
  for (size_t r = 30; r < 40; ++r) rows.push_back({&a, r});
  rows.push_back({&a, 39});
  for (size_t r = 0; r < 10; ++r) rows.push_back({r % 2 ? &a : &b, r * 2});
  for (size_t r = 24; r-- > 0;) rows.push_back({&b, r});

  // Into a block that already holds a sample, so both must append after it.
  SampleBlock want = RandomBlock(&slots, 1, &rng);
  SampleBlock got(&slots);
  got.AppendFrom(want, 0);
  for (const SampleRow& r : rows) want.AppendFrom(*r.block, r.row);
  got.AppendRows(rows);
  ExpectSameColumns(got, want);

  // The batch's LoD is the gathered offsets; its values are the gathered column.
  Batch batch = ToBatch(std::move(got));
  ASSERT_EQ(batch.num_samples, static_cast<int64_t>(want.size()));
  const LoDTensor& ids = batch.tensors[0];
  ASSERT_EQ(ids.lod().size(), 1u);
  EXPECT_EQ(ids.lod()[0],
            std::vector<size_t>(want.column(0).offsets.begin(), want.column(0).offsets.end()));
  EXPECT_EQ(ids.shape(), (Shape{static_cast<int64_t>(want.column(0).ids.size()), 1}));
  EXPECT_TRUE(
      std::equal(want.column(0).ids.begin(), want.column(0).ids.end(), ids.data<int64_t>()));
  EXPECT_EQ(batch.tensors[1].shape(), (Shape{static_cast<int64_t>(want.size()), 3}));
  EXPECT_TRUE(std::equal(want.column(1).values.begin(), want.column(1).values.end(),
                         batch.tensors[1].data<float>()));
}

TEST(SampleGather, AppendRowsOfNoRowsLeavesTheBlockAsItWas) {
  const std::vector<SlotSpec> slots = GatherSlots();
  std::mt19937 rng(5);
  SampleBlock block = RandomBlock(&slots, 3, &rng);
  SampleBlock copy(&slots);
  for (size_t r = 0; r < block.size(); ++r) copy.AppendFrom(block, r);
  block.AppendRows({});
  ExpectSameColumns(block, copy);
}

class InMemoryPassTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fleet_sample_gather_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // Lines first..last-1 of a MultiSlot file: sample k has k % 3 + 1 ids (k * 10 + j), w
  // (k, -k, 0.5) and label k.
  std::string WriteLines(const std::string& name, int first, int last) {
    std::string path = dir_ + "/" + name;
    std::ofstream out(path);
    for (int k = first; k < last; ++k) {
      out << (k % 3 + 1);
      for (int j = 0; j <= k % 3; ++j) out << ' ' << k * 10 + j;
      out << " 3 " << k << ' ' << -k << " 0.5 " << (k % 3 + 1);
      for (int j = 0; j <= k % 3; ++j) out << ' ' << k + j * 0.25;
      out << " 1 " << k << '\n';
    }
    return path;
  }

  // An in-memory dataset of `files` with GatherSlots(), loaded.
  static std::unique_ptr<InMemoryDataset> Loaded(const std::vector<std::string>& files,
                                                 int batch_size, int threads) {
    DataFeedConfig config;
    config.slots = GatherSlots();
    config.batch_size = batch_size;
    config.threads = threads;
    auto dataset = std::make_unique<InMemoryDataset>(config, files);
    dataset->LoadIntoMemory();
    return dataset;
  }

  std::string dir_;
};

TEST_F(InMemoryPassTest, EveryLoadedSampleComesOutOnceInItsBatchAcrossFileBlocks) {
  // Each file is its own memory block: batches 1 and 3 of 6 samples span two blocks, and the
  // last batch is short.
  std::vector<std::string> files = {WriteLines("a", 0, 10), WriteLines("b", 10, 20),
                                    WriteLines("c", 20, 23)};
  auto dataset = Loaded(files, /*batch_size=*/6, /*threads=*/2);
  ASSERT_EQ(dataset->MemoryDataSize(), 23u);

  Channel<Batch> channel(8);
  auto pass = dataset->NewPass();
  pass->Start(&channel);
  std::vector<Batch> batches;
  while (auto batch = channel.Get()) batches.push_back(std::move(*batch));
  EXPECT_EQ(pass->Join().samples, 23);
  // Two producers may put their batches in either order: sort them by their first label.
  std::sort(batches.begin(), batches.end(), [](const Batch& x, const Batch& y) {
    return x.tensors[3].data<int64_t>()[0] < y.tensors[3].data<int64_t>()[0];
  });
  ASSERT_EQ(batches.size(), 4u);
  for (size_t b = 0; b < batches.size(); ++b) {
    SCOPED_TRACE(b);
    const Batch& batch = batches[b];
    const int first = static_cast<int>(b) * 6;
    const int n = std::min(6, 23 - first);
    ASSERT_EQ(batch.num_samples, n);
    std::vector<int64_t> ids, labels;
    std::vector<float> w, weights;
    std::vector<size_t> offsets{0}, weight_offsets{0};
    for (int k = first; k < first + n; ++k) {
      for (int j = 0; j <= k % 3; ++j) ids.push_back(k * 10 + j);
      for (int j = 0; j <= k % 3; ++j) weights.push_back(static_cast<float>(k + j * 0.25));
      offsets.push_back(ids.size());
      weight_offsets.push_back(weights.size());
      w.insert(w.end(), {static_cast<float>(k), static_cast<float>(-k), 0.5f});
      labels.push_back(k);
    }
    EXPECT_EQ(batch.tensors[0].lod(), LoD{offsets});
    EXPECT_EQ(ValuesOf<int64_t>(batch.tensors[0]), ids);
    EXPECT_EQ(ValuesOf<float>(batch.tensors[1]), w);
    EXPECT_EQ(batch.tensors[2].lod(), LoD{weight_offsets});
    EXPECT_EQ(ValuesOf<float>(batch.tensors[2]), weights);
    EXPECT_EQ(ValuesOf<int64_t>(batch.tensors[3]), labels);
  }
}

TEST_F(InMemoryPassTest, AShuffledPassGathersTheSameSamplesAsAnUnshuffledOne) {
  std::vector<std::string> files = {WriteLines("a", 0, 17), WriteLines("b", 17, 40)};
  auto dataset = Loaded(files, /*batch_size=*/7, /*threads=*/1);
  dataset->LocalShuffle(3);
  Channel<Batch> channel(16);
  auto pass = dataset->NewPass();
  pass->Start(&channel);
  // Every sample's ids must still be its own (k * 10 + j for its label k), whatever its batch.
  std::vector<int> seen(40, 0);
  bool reordered = false;
  int64_t previous = -1;
  while (auto batch = channel.Get()) {
    const LoDTensor& ids = batch->tensors[0];
    const int64_t* labels = batch->tensors[3].data<int64_t>();
    for (int64_t s = 0; s < batch->num_samples; ++s) {
      const int64_t k = labels[s];
      ASSERT_GE(k, 0);
      ASSERT_LT(k, 40);
      ++seen[k];
      reordered |= k != previous + 1;
      previous = k;
      const size_t begin = ids.lod()[0][s];
      const size_t end = ids.lod()[0][s + 1];
      ASSERT_EQ(end - begin, static_cast<size_t>(k % 3 + 1));
      for (size_t j = begin; j < end; ++j) {
        EXPECT_EQ(ids.data<int64_t>()[j], k * 10 + static_cast<int64_t>(j - begin));
      }
      EXPECT_EQ(batch->tensors[1].data<float>()[s * 3 + 1], static_cast<float>(-k));
    }
  }
  pass->Join();
  EXPECT_TRUE(reordered);
  EXPECT_EQ(seen, std::vector<int>(40, 1));
}

}  // namespace
}  // namespace fleet::data
