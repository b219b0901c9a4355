#pragma once
// Datasets: where train_from_dataset gets its batches.
//
// QueueDataset streams: every pass reads the files again through reader threads into a bounded
// channel. InMemoryDataset parses the files once into memory (LoadIntoMemory), can shuffle them
// (locally with a seed, or across workers through an all-to-all exchange function), and every
// pass assembles batches from memory with producer threads.
//
// A pass is a BatchSource: it fills a Channel<Batch> from its own threads and closes it when it
// is done, has failed, or has been cancelled.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "data/channel.h"
#include "data/file_readers.h"
#include "data/slots.h"

namespace fleet::data {

struct DataFeedConfig {
  std::vector<SlotSpec> slots;
  int64_t batch_size = 1;
  int threads = 1;  // reader threads; producer threads of an in-memory pass
  std::string pipe_command;
  bool skip_bad_lines = false;
  // A pipe_command silent for this long is killed with a Timeout naming the file and command.
  absl::Duration pipe_idle_timeout = absl::Minutes(10);
  // The scheduling of a pass's feed threads (queue readers, in-memory producers) and of the
  // pipe_commands they start; see core/thread_priority.h. Loads into memory keep kNormal.
  // Python's datasets pass fleet.dataset.FEED_PRIORITY unless told otherwise.
  ThreadPriority feed_priority = ThreadPriority::kNormal;
  // Non-fatal findings of the readers (see ReaderOptions::warn); null: dropped.
  std::function<void(const std::string&)> warn;
};

// One pass over a dataset. Start() returns at once; the source's threads Put batches into the
// channel and Close() it when they are done, when one fails, or after Cancel().
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual void Start(Channel<Batch>* out) = 0;
  // Stops producing soon; running pipe commands are killed. Idempotent.
  virtual void Cancel() = 0;
  // True once a producer has failed (the error comes out of Join()).
  virtual bool failed() const = 0;
  // Waits for the producers; rethrows the first producer error.
  virtual ReadStats Join() = 0;
};

class Dataset {
 public:
  explicit Dataset(DataFeedConfig config);
  virtual ~Dataset() = default;
  const DataFeedConfig& config() const { return config_; }
  // Changes how later passes batch the samples (the slots and files stay). Not while a pass runs.
  void SetBatching(int64_t batch_size, int threads);
  // A new pass. Throws before anything starts when the pass cannot run (missing files, ...).
  virtual std::unique_ptr<BatchSource> NewPass() = 0;

 protected:
  DataFeedConfig config_;
};

class QueueDataset : public Dataset {
 public:
  // Throws InvalidArgument for an empty file list (missing files are checked by each pass).
  QueueDataset(DataFeedConfig config, std::vector<std::string> files);
  std::unique_ptr<BatchSource> NewPass() override;

 private:
  std::vector<std::string> files_;
};

class InMemoryDataset : public Dataset {
 public:
  // Sends payloads[i] to worker i and returns what each worker sent to this one (result[j] from
  // worker j). payloads[rank] is empty: a worker keeps its own share. Blocking; collective: every
  // worker calls it once per shuffle.
  using Exchange = std::function<std::vector<std::string>(std::vector<std::string> payloads)>;

  InMemoryDataset(DataFeedConfig config, std::vector<std::string> files);
  ~InMemoryDataset() override;

  // Parses every file into memory, appending to what is there, in file order. Blocking.
  // `interrupted`, when given, is polled about every 100 ms from the calling thread; once it
  // returns true the readers are stopped (pipe commands killed), memory is left as it was, and
  // the returned stats have `interrupted` set.
  ReadStats LoadIntoMemory(const std::function<bool()>& interrupted = nullptr);
  // Shuffles the samples in memory; the same seed and data give the same order.
  void LocalShuffle(uint64_t seed);
  // Sends every sample to a worker drawn at random (seeded), exchanges them with `exchange`,
  // keeps what this worker receives and shuffles it locally. With world_size 1 it is a local
  // shuffle through the same code path.
  void GlobalShuffle(int rank, int world_size, const Exchange& exchange, uint64_t seed);
  size_t MemoryDataSize() const;  // samples in memory
  size_t MemoryBytes() const;
  void ReleaseMemory();

  std::unique_ptr<BatchSource> NewPass() override;

 private:
  class Pass;
  struct SampleRef {
    uint32_t block;
    uint32_t row;
  };
  void CheckIdle(const char* what) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  std::vector<std::string> files_;
  mutable absl::Mutex mu_;
  std::vector<SampleBlock> blocks_ ABSL_GUARDED_BY(mu_);
  std::vector<SampleRef> order_ ABSL_GUARDED_BY(mu_);  // the sample order passes follow
  std::atomic<int> active_passes_{0};
};

}  // namespace fleet::data
