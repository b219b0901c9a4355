#pragma once
// Communicator: a worker's side of parameter-server training. One per worker process, built by
// MakeCommunicator from one typed config, shared by every trainer thread and by the Executor.run
// loop through the executor's RuntimeResources (framework/runtime.h). The distributed ops call
// it (pull_sparse, push_sparse, send: ps_ops.cc); its step hook decides what happens between
// batches. The modes are siblings behind this interface, not an inheritance chain:
//
//   sync        every step, the trainer threads of a worker meet, their gradients are averaged
//               and pushed to the servers' accumulators; a sync-step barrier on every server
//               applies the average over all workers once; the worker pulls dense parameters
//               before the next step. Equals one process with the workers' batches joined.
//   half_async  as sync within a worker (threads meet, merge, push, pull dense), no barrier
//               across workers: the servers apply each worker's push as it comes.
//   async       gradients go into bounded per-variable queues; send threads merge up to
//               max_merge_var_num of them (summed; only for SGD tables, see async_communicator.h)
//               and push;
//               dense parameters are refreshed after each round of sends (or by their own
//               thread). Training waits only when a queue is full.
//   geo         the worker trains its own copy of every parameter (dense: the program's own
//               optimizer ops; sparse: local rows with the user's update rule); every
//               update_frequency steps it pushes the deltas (value - last synced value) of the
//               dense parameters and of the sparse rows it touched, and pulls their fresh values.
//
// Thread safety: every method may be called from any trainer thread at once.
// Errors: a failed RPC (dead server: the endpoint is named) surfaces in the op or hook that
// waits for it; in async mode an error of a send thread surfaces in the next call.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/lod_tensor.h"
#include "core/scope.h"
#include "fleet/ps/ps.pb.h"
#include "framework/runtime.h"
#include "ps/client/client.h"

namespace fleet::distributed {

enum class PsMode { kSync, kHalfAsync, kAsync, kGeo };

// A dense parameter's place in the worker's one dense table (all dense parameters, packed).
struct DenseVar {
  std::string param;  // in the root scope
  std::string grad;   // what the send op gets, in this order
  size_t offset = 0;  // in the packed table
  size_t numel = 0;
};

// A sparse table (an embedding on the servers).
struct SparseVar {
  uint32_t table_id = 0;
  size_t dim = 0;
  std::string name;  // the embedding parameter's name, for messages
  // The variables a step's pull_sparse op reads the table's ids from, in order (the PS pass's
  // plan, SparseTablePlan.id_vars): async dataset passes prefetch the rows of these ids for the
  // next batch. Required in async mode with prefetch_sparse (InvalidArgument otherwise).
  std::vector<std::string> ids;
  // GEO: the user's optimizer, applied locally to the worker's copy of the rows.
  ps::proto::OptimizerConfig local_rule;
};

struct CommunicatorConfig {
  PsMode mode = PsMode::kAsync;
  uint32_t worker_id = 0;
  uint32_t num_workers = 1;
  std::optional<uint32_t> dense_table_id;  // none when the program has no dense parameter
  std::vector<DenseVar> dense;
  std::vector<SparseVar> sparse;
  // async
  size_t send_queue_size = 16;
  size_t max_merge_var_num = 4;
  int send_wait_times = 1;  // 10 ms waits for more gradients before a partial merge is sent
  int thread_pool_size = 1;
  bool independent_recv = false;
  // Gradients of its own a trainer thread's dense values may lack when a step starts; < 0: no
  // bound (see detail/async_communicator.h).
  int max_dense_staleness = 0;
  // Async dataset passes: pull the next batch's sparse rows of a table (its SparseVar.ids) as
  // soon as the current batch's gradients of it are queued, while the rest of the step runs
  // (detail/sparse_prefetch.h). GEO dataset passes: pull the rows the next batch lacks locally
  // while the current batch runs (detail/geo_row_prefetch.h).
  bool prefetch_sparse = true;
  // Async: gradients of its own a worker's values of a sparse table may lack when it pulls rows:
  // a pull waits until the servers acknowledged every push of the table the worker queued but
  // the last S; < 0: no bound. A bound turns prefetch_sparse off (detail/async_communicator.h).
  int max_sparse_staleness = -1;
  // geo
  int64_t geo_steps = 100;
  // sync: how long a worker waits at a step barrier for the others (a dead worker is named
  // by the count that arrived).
  absl::Duration step_timeout = absl::Minutes(5);
};

const char* PsModeName(PsMode mode);

class Communicator {
 public:
  static constexpr char kResourceName[] =
      "parameter-server communicator (fleet.init_worker() in a PS job)";

  virtual ~Communicator() = default;

  // Copies the rows of `keys` into out[i * dim, ...) for trainer thread `thread` (a mode may
  // serve them from rows it prefetched for the thread's batch). `from_servers` (inference
  // programs) reads the servers' values even in GEO mode. Blocks until the rows are there.
  virtual void PullSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                          absl::Span<float> out, bool from_servers) = 0;
  // The rows of `keys`, dim floats a key, as PullSparse gives them, in a buffer that becomes the
  // caller's: the pull_sparse op makes its outputs views of it, so that rows a mode prefetched
  // for the batch reach the op's tensors without a copy, and other rows land there without a
  // zeroed staging vector. The buffer holds at least keys.size() * dim floats; nothing else
  // writes it once it is returned.
  virtual std::shared_ptr<Buffer> PullSparseRows(int thread, uint32_t table_id,
                                                 absl::Span<const int64_t> keys, size_t dim,
                                                 bool from_servers) = 0;
  // Hands over the gradient rows of `keys` (one row per key, keys may repeat). Copies them.
  virtual void PushSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                          absl::Span<const float> grads) = 0;
  // PushSparse of vectors the caller gives up: a mode that queues the rows keeps them as they
  // are instead of copying (the op gathers a table's slots into new vectors anyway).
  virtual void PushSparseOwned(int thread, uint32_t table_id, std::vector<int64_t> keys,
                               std::vector<float> grads) = 0;
  // Hands over the dense gradients, one tensor per DenseVar in config order. Copies them.
  virtual void SendDense(int thread, const std::vector<const LoDTensor*>& grads) = 0;

  // init_worker: worker 0 offers its start-up dense values (they become the servers' values
  // once, unless the servers loaded a checkpoint), every worker waits for all, then pulls the
  // dense values into the root scope so that every worker starts from the same values; then the
  // mode's background threads start.
  virtual void Start() = 0;
  // Pushes everything pending and waits for it (stop_worker, the end of a dataset pass).
  virtual void Flush() = 0;
  // Flushes, stops the background threads. Idempotent.
  virtual void Stop() = 0;

  // The step hooks to register with the executor's RuntimeResources: the mode's, and the ones
  // it owns (the async mode's sparse prefetch).
  virtual std::vector<std::shared_ptr<framework::StepHook>> hooks() = 0;

  virtual const CommunicatorConfig& config() const = 0;
  virtual ps::PsClient& client() = 0;
};

// The communicator of config.mode. `root` (the scope holding the dense parameters) must outlive
// it. InvalidArgument for an inconsistent config (dense offsets, unknown tables).
std::shared_ptr<Communicator> MakeCommunicator(CommunicatorConfig config,
                                               std::shared_ptr<ps::PsClient> client, Scope* root);

// Pulls an async communicator served from rows prefetched while the step before ran (GEO: pulls
// whose new rows a prefetch brought, detail/geo_row_prefetch.h); 0 for the other modes and
// without prefetch_sparse (tests, benchmarks).
int64_t PrefetchedPulls(const Communicator& communicator);

// What an async worker's trainer threads waited for in their steps since the communicator was
// built: each count is of calls that found what they needed not there yet and blocked (once or
// more), so a profile's wake-ups can be told apart by cause (benchmarks/cpu_window.py counts the
// wake-ups). GEO with prefetch_sparse counts sparse_prefetch and sparse_pull (its pulls of rows
// new to the worker: prefetched ones waited for, and ones still pulled at the step). All zero
// for the other modes.
struct TrainerWaits {
  // Steps that waited at their start for dense values holding the thread's own gradients but
  // the last max_dense_staleness (the bound's wait for a push's round trip).
  int64_t dense_refresh = 0;
  // pull_sparse calls served from a prefetch whose rows had not arrived yet.
  int64_t sparse_prefetch = 0;
  // pull_sparse calls that pulled from the servers at the step (no prefetch to serve them):
  // each waits for a round trip.
  int64_t sparse_pull = 0;
  // Gradients that waited for room in their send queue (send_queue_size).
  int64_t send_queue_full = 0;
};
TrainerWaits AsyncTrainerWaits(const Communicator& communicator);

}  // namespace fleet::distributed
