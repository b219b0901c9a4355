#include "data/dataset.h"

#include <algorithm>
#include <random>
#include <thread>
#include <tuple>

namespace fleet::data {
namespace {

// Samples per in-memory block: large enough to amortise allocations, small enough that a
// file's tail does not waste much.
constexpr size_t kMemoryBlockSamples = 8192;

void CheckConfig(const DataFeedConfig& config) {
  FLEET_ENFORCE(!config.slots.empty(), InvalidArgument,
                "the dataset uses no variables (call set_use_var first)");
  FLEET_ENFORCE(config.batch_size > 0, InvalidArgument, "batch size must be positive, got ",
                config.batch_size);
  FLEET_ENFORCE(config.threads > 0, InvalidArgument, "dataset thread count must be positive, got ",
                config.threads);
  FLEET_ENFORCE(config.pipe_idle_timeout > absl::ZeroDuration(), InvalidArgument,
                "pipe_command timeout must be positive, got ",
                absl::ToDoubleSeconds(config.pipe_idle_timeout), " s");
}

ReaderOptions ReaderOptionsOf(const DataFeedConfig& config) {
  ReaderOptions options;
  options.pipe_command = config.pipe_command;
  options.pipe_idle_timeout = config.pipe_idle_timeout;
  options.warn = config.warn;
  options.threads = config.threads;
  options.skip_bad_lines = config.skip_bad_lines;
  return options;
}

// A streaming pass: reader threads parse files straight into batches.
class QueuePass : public BatchSource {
 public:
  QueuePass(DataFeedConfig config, std::vector<std::string> files)
      : config_(std::move(config)), files_(std::move(files)) {}
  ~QueuePass() override { Cancel(); }

  void Start(Channel<Batch>* out) override {
    out_ = out;
    ReaderOptions options = ReaderOptionsOf(config_);
    options.block_samples = static_cast<size_t>(config_.batch_size);
    options.priority = config_.feed_priority;
    readers_ = std::make_unique<FileReaders>(
        files_, &config_.slots, options,
        [out](SampleBlock&& block, size_t, size_t) { return out->Put(ToBatch(std::move(block))); },
        [out] { out->Close(); });
    readers_->Start();
  }
  void Cancel() override {
    if (readers_) readers_->Cancel();
    if (out_) out_->Close();
  }
  bool failed() const override { return readers_ != nullptr && readers_->failed(); }
  ReadStats Join() override { return readers_->Join(); }

 private:
  DataFeedConfig config_;  // the slots outlive the readers' blocks
  std::vector<std::string> files_;
  Channel<Batch>* out_ = nullptr;
  std::unique_ptr<FileReaders> readers_;
};

}  // namespace

Dataset::Dataset(DataFeedConfig config) : config_(std::move(config)) { CheckConfig(config_); }

void Dataset::SetBatching(int64_t batch_size, int threads) {
  DataFeedConfig updated = config_;
  updated.batch_size = batch_size;
  updated.threads = threads;
  CheckConfig(updated);
  config_ = std::move(updated);
}

QueueDataset::QueueDataset(DataFeedConfig config, std::vector<std::string> files)
    : Dataset(std::move(config)), files_(std::move(files)) {
  FLEET_ENFORCE(!files_.empty(), InvalidArgument,
                "the dataset's file list is empty (call set_filelist with at least one file)");
}

std::unique_ptr<BatchSource> QueueDataset::NewPass() {
  CheckFiles(files_);
  return std::make_unique<QueuePass>(config_, files_);
}

// A pass over memory: producer threads gather fixed batches (batch k = samples
// [k * batch_size, (k + 1) * batch_size) of the current order) and put them in the channel.
// The dataset refuses to change its memory while a pass exists, so the pass reads it unlocked.
class InMemoryDataset::Pass : public BatchSource {
 public:
  explicit Pass(InMemoryDataset* dataset) : dataset_(dataset) {
    absl::MutexLock lock(&dataset_->mu_);  // waits for a running load or shuffle
    ++dataset_->active_passes_;
  }
  ~Pass() override {
    Cancel();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    --dataset_->active_passes_;
  }

  void Start(Channel<Batch>* out) ABSL_NO_THREAD_SAFETY_ANALYSIS override {
    out_ = out;
    const int64_t batch = dataset_->config_.batch_size;
    num_batches_ = (static_cast<int64_t>(dataset_->order_.size()) + batch - 1) / batch;
    int n = static_cast<int>(std::min<int64_t>(dataset_->config_.threads, num_batches_));
    n = std::max(n, 1);
    running_.store(n);
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Produce(); });
  }
  void Cancel() override {
    cancel_.store(true);
    if (out_) out_->Close();
  }
  bool failed() const override { return failed_.load(); }
  ReadStats Join() override {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    if (error_) std::rethrow_exception(error_);
    ReadStats stats;
    stats.samples = static_cast<int64_t>(samples_.load());
    return stats;
  }

 private:
  void Produce() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    EnterFeedThread("data_producer", dataset_->config_.feed_priority, dataset_->config_.warn,
                    &priority_warned_);
    const auto& order = dataset_->order_;
    const int64_t batch = dataset_->config_.batch_size;
    std::vector<SampleRow> rows;  // the batch's samples; reused from batch to batch
    try {
      while (!cancel_.load()) {
        int64_t k = next_.fetch_add(1);
        if (k >= num_batches_) break;
        size_t begin = static_cast<size_t>(k * batch);
        size_t end = std::min(order.size(), begin + static_cast<size_t>(batch));
        rows.clear();
        for (size_t i = begin; i < end; ++i) {
          rows.push_back({&dataset_->blocks_[order[i].block], order[i].row});
        }
        SampleBlock block(&dataset_->config_.slots);
        block.AppendRows(rows);
        samples_.fetch_add(end - begin);
        if (!out_->Put(ToBatch(std::move(block)))) break;
      }
    } catch (...) {
      if (!failed_.exchange(true)) error_ = std::current_exception();
      cancel_.store(true);
    }
    if (running_.fetch_sub(1) == 1) out_->Close();
  }

  InMemoryDataset* dataset_;
  Channel<Batch>* out_ = nullptr;
  int64_t num_batches_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<size_t> samples_{0};
  std::atomic<int> running_{0};
  std::atomic<bool> cancel_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> priority_warned_{false};
  std::exception_ptr error_;  // written once, by the thread that set failed_, read after join
  std::vector<std::thread> threads_;
};

InMemoryDataset::InMemoryDataset(DataFeedConfig config, std::vector<std::string> files)
    : Dataset(std::move(config)), files_(std::move(files)) {}

InMemoryDataset::~InMemoryDataset() = default;

void InMemoryDataset::CheckIdle(const char* what) const {
  FLEET_ENFORCE(active_passes_.load() == 0, InvalidArgument, "InMemoryDataset.", what,
                ": a train_from_dataset/infer_from_dataset pass is using the data");
}

ReadStats InMemoryDataset::LoadIntoMemory(const std::function<bool()>& interrupted) {
  CheckFiles(files_);
  absl::MutexLock lock(&mu_);
  CheckIdle("load_into_memory");
  ReaderOptions options = ReaderOptionsOf(config_);
  options.block_samples = kMemoryBlockSamples;
  options.block_per_file = true;
  absl::Mutex loaded_mu;
  std::vector<std::tuple<size_t, size_t, SampleBlock>> loaded;
  FileReaders readers(files_, &config_.slots, options,
                      [&](SampleBlock&& block, size_t file, size_t sequence) {
                        absl::MutexLock l(&loaded_mu);
                        loaded.emplace_back(file, sequence, std::move(block));
                        return true;
                      });
  readers.Start();
  if (interrupted) {
    while (!readers.WaitFor(absl::Milliseconds(100))) {
      if (interrupted()) {
        readers.Cancel();
        try {
          readers.Join();
        } catch (const std::exception&) {  // the interrupt is what the caller reports
        }
        ReadStats stats;
        stats.interrupted = true;
        return stats;
      }
    }
  }
  ReadStats stats = readers.Join();
  // Readers finish in any order; file order makes memory (and so every shuffle) reproducible.
  std::sort(loaded.begin(), loaded.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  for (auto& entry : loaded) {
    SampleBlock& block = std::get<2>(entry);
    const uint32_t index = static_cast<uint32_t>(blocks_.size());
    for (uint32_t row = 0; row < block.size(); ++row) order_.push_back({index, row});
    blocks_.push_back(std::move(block));
  }
  return stats;
}

void InMemoryDataset::LocalShuffle(uint64_t seed) {
  absl::MutexLock lock(&mu_);
  CheckIdle("local_shuffle");
  std::mt19937_64 rng(seed);
  std::shuffle(order_.begin(), order_.end(), rng);
}

void InMemoryDataset::GlobalShuffle(int rank, int world_size, const Exchange& exchange,
                                    uint64_t seed) {
  FLEET_ENFORCE(world_size > 0 && rank >= 0 && rank < world_size, InvalidArgument,
                "global_shuffle: rank ", rank, " is not in a world of ", world_size);
  absl::MutexLock lock(&mu_);
  CheckIdle("global_shuffle");
  std::mt19937_64 rng(seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(rank + 1)));
  std::vector<SampleBlock> outgoing(world_size, SampleBlock(&config_.slots));
  for (const SampleRef& ref : order_) {
    outgoing[rng() % static_cast<uint64_t>(world_size)].AppendFrom(blocks_[ref.block], ref.row);
  }
  std::vector<std::string> payloads(world_size);
  for (int i = 0; i < world_size; ++i) {
    if (i != rank) payloads[i] = outgoing[i].Serialize();
    if (i != rank) outgoing[i] = SampleBlock(&config_.slots);
  }
  std::vector<std::string> received = exchange(std::move(payloads));
  FLEET_ENFORCE(received.size() == static_cast<size_t>(world_size), InvalidArgument,
                "global_shuffle: the exchange returned ", received.size(), " payloads for ",
                world_size, " workers");
  // Only now, with the exchange done, is the old memory let go: a failed exchange keeps it.
  blocks_.clear();
  order_.clear();
  SampleBlock mine = std::move(outgoing[rank]);
  for (int j = 0; j < world_size; ++j) {
    if (j != rank) mine.AppendSerialized(received[j]);
  }
  for (uint32_t row = 0; row < mine.size(); ++row) order_.push_back({0, row});
  blocks_.push_back(std::move(mine));
  std::shuffle(order_.begin(), order_.end(), rng);
}

size_t InMemoryDataset::MemoryDataSize() const {
  absl::MutexLock lock(&mu_);
  return order_.size();
}

size_t InMemoryDataset::MemoryBytes() const {
  absl::MutexLock lock(&mu_);
  size_t bytes = order_.size() * sizeof(SampleRef);
  for (const auto& b : blocks_) bytes += b.ByteSize();
  return bytes;
}

void InMemoryDataset::ReleaseMemory() {
  absl::MutexLock lock(&mu_);
  CheckIdle("release_memory");
  std::vector<SampleBlock>().swap(blocks_);
  std::vector<SampleRef>().swap(order_);
}

std::unique_ptr<BatchSource> InMemoryDataset::NewPass() { return std::make_unique<Pass>(this); }

}  // namespace fleet::data
