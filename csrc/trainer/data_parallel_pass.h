#pragma once
// train_from_dataset of a data-parallel program: one pass of a dataset through a
// DataParallelEngine. Each step takes one batch a replica from the dataset's channel (as
// Paddle's ParallelExecutor gives each device its own batch from a reader), so a step trains
// on replicas x batch_size samples; at the end of the pass the last step may have fewer batches
// than replicas (the others sit it out, and the gradients are averaged over those that ran).
//
// Blocking: runs the pass on the calling thread (the replicas on the engine's threads) until the
// dataset is exhausted, a reader or a step fails (rethrown after the readers are joined), or
// `stop` becomes true (a cancelled pass ends after its current step; Cancelled is not an
// error). No Python runs inside.

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "trainer/data_parallel.h"

namespace fleet::trainer {

struct DataParallelPassOptions {
  std::vector<std::string> fetch_names;
  std::vector<std::string> fetch_labels;  // printed names; empty = the variable names
  int64_t print_period = 100;             // steps between progress lines; 0 = none
  std::function<void(const std::string&)> log;
};

struct DataParallelPassResult {
  int64_t steps = 0;
  int64_t batches = 0;
  int64_t samples = 0;
  double seconds = 0;
  data::ReadStats read;
  // Per fetch variable: the sum of its elements over every replica of every step (for a
  // scalar loss, fetch_sums[i] / batches is the pass's mean loss).
  std::vector<double> fetch_sums;
  // The fetch variables of the last step, the replicas' values concatenated along dimension 0.
  std::vector<LoDTensor> last_fetch;
};

DataParallelPassResult RunDataParallelPass(DataParallelEngine* engine, data::Dataset* dataset,
                                           const DataParallelPassOptions& options,
                                           const std::atomic<bool>& stop,
                                           framework::RunStats* stats);

}  // namespace fleet::trainer
