// The NCCL backend (compiled only when CMake found CUDA and NCCL; nccl_unavailable.cc otherwise).
#include "collective/nccl_backend.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collective/detail/call_check.h"
#include "collective/unique_id_exchange.h"
#include "core/errors.h"

namespace fleet::collective {
namespace {

using Clock = std::chrono::steady_clock;

// How often a waiting call looks at its stream and communicator: short, since a collective of a
// small bucket takes tens of microseconds.
constexpr auto kPollInterval = std::chrono::microseconds(20);

std::string CudaError(cudaError_t e) { return absl::StrCat(cudaGetErrorString(e), " (", e, ")"); }

std::string NcclError(ncclResult_t r) {
  return absl::StrCat(ncclGetErrorString(r), " (", static_cast<int>(r), ")");
}

ncclDataType_t NcclType(DType dtype, const std::string& where) {
  switch (dtype) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    default:
      throw InvalidArgument(absl::StrCat(where, ": NCCL all-reduce of ", DTypeName(dtype),
                                         " is not supported (float32, float64, int32, int64)"));
  }
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  return ncclSum;
}

}  // namespace

bool nccl_compiled() { return true; }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

struct NcclBackend::State {
  int device = 0;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  void* scratch = nullptr;  // device memory for the call check and the barrier
  size_t next = 0;          // the communicator of the next call
  uint64_t sequence = 0;    // calls made, for the call check
  bool broken = false;
  std::mutex mu;  // calls from several threads run one at a time (backend.h)

  ~State() {
    cudaSetDevice(device);
    for (ncclComm_t c : comms) {
      if (broken) {
        ncclCommAbort(c);
      } else {
        ncclCommDestroy(c);
      }
    }
    for (cudaStream_t s : streams) cudaStreamDestroy(s);
    if (scratch != nullptr) cudaFree(scratch);
  }
};

namespace {

// Waits until the communicator's pending operation (init, or an enqueue of a non-blocking
// communicator) is no longer in progress; aborts and throws at the deadline or on an error.
void AwaitComm(ncclComm_t comm, Clock::time_point deadline, const std::string& what, bool* broken) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      *broken = true;
      ncclCommAbort(comm);
      throw Unavailable(absl::StrCat(what, " failed: ", NcclError(state),
                                     " (a peer failed or left); the group is broken"));
    }
    if (Clock::now() > deadline) {
      *broken = true;
      ncclCommAbort(comm);
      throw Timeout(absl::StrCat(what,
                                 " did not complete in time (a peer is missing or "
                                 "stuck); the communicator was aborted, the group is broken"));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

// Waits for the work enqueued on `stream` (by `comm`), watching the communicator for errors.
void AwaitStream(ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline,
                 const std::string& what, bool* broken) {
  while (true) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      *broken = true;
      throw Unavailable(absl::StrCat(what, ": CUDA error ", CudaError(e)));
    }
    AwaitComm(comm, Clock::now() + std::chrono::hours(24), what, broken);  // errors only
    if (Clock::now() > deadline) {
      *broken = true;
      ncclCommAbort(comm);
      throw Timeout(absl::StrCat(what,
                                 " did not complete in time (a peer is missing or "
                                 "stuck); the communicator was aborted, the group is broken"));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace

std::unique_ptr<NcclBackend> NcclBackend::Connect(Store* store, int rank, int size,
                                                  const NcclOptions& options) {
  const std::string where =
      absl::StrCat("NCCL group '", options.name, "' (rank ", rank, " of ", size, ")");
  FLEET_ENFORCE(size > 0 && rank >= 0 && rank < size, InvalidArgument, where,
                ": rank must be in [0, size)");
  FLEET_ENFORCE(options.comm_num >= 1, InvalidArgument, where,
                ": comm_num must be at least 1, got ", options.comm_num);
  const int devices = cuda_device_count();
  FLEET_ENFORCE(devices > 0, Unavailable, where,
                ": this machine has no CUDA device (use the Gloo backend on CPU)");
  FLEET_ENFORCE(options.device >= 0 && options.device < devices, InvalidArgument, where,
                ": device ", options.device, " does not exist (", devices, " CUDA devices)");
  auto state = std::make_unique<State>();
  state->device = options.device;
  cudaError_t e = cudaSetDevice(options.device);
  FLEET_ENFORCE(e == cudaSuccess, Unavailable, where, ": cudaSetDevice(", options.device,
                "): ", CudaError(e));
  const auto deadline = Clock::now() + options.timeout;
  for (int c = 0; c < options.comm_num; ++c) {
    const std::string key = absl::StrCat("nccl/", options.name, "/id/", c);
    std::string id_bytes = ExchangeUniqueId(
        store, key, rank, sizeof(ncclUniqueId),
        [&] {
          ncclUniqueId id;
          ncclResult_t r = ncclGetUniqueId(&id);
          FLEET_ENFORCE(r == ncclSuccess, Unavailable, where, ": ncclGetUniqueId: ", NcclError(r));
          return std::string(id.internal, sizeof(id.internal));
        },
        options.timeout, where);
    ncclUniqueId id;
    std::memcpy(id.internal, id_bytes.data(), sizeof(id.internal));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // init and calls return at once; we poll them against deadlines
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
    FLEET_ENFORCE(r == ncclSuccess || r == ncclInProgress, Unavailable, where,
                  ": ncclCommInitRankConfig: ", NcclError(r));
    state->comms.push_back(comm);
    AwaitComm(comm, deadline, absl::StrCat(where, ": communicator ", c, " init"), &state->broken);
    cudaStream_t stream = nullptr;
    e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    FLEET_ENFORCE(e == cudaSuccess, Unavailable, where, ": cudaStreamCreate: ", CudaError(e));
    state->streams.push_back(stream);
  }
  e = cudaMalloc(&state->scratch, sizeof(detail::CallSignature) * size);
  FLEET_ENFORCE(e == cudaSuccess, Unavailable, where, ": cudaMalloc: ", CudaError(e));
  return std::unique_ptr<NcclBackend>(new NcclBackend(rank, size, options.name, std::move(state)));
}

NcclBackend::NcclBackend(int rank, int size, std::string name, std::unique_ptr<State> state)
    : rank_(rank), size_(size), name_(std::move(name)), state_(std::move(state)) {}

NcclBackend::~NcclBackend() = default;

int NcclBackend::comm_num() const { return static_cast<int>(state_->comms.size()); }

void NcclBackend::Call(const detail::CallSignature& mine, Duration timeout, const std::string& what,
                       const std::function<int(size_t comm)>& enqueue) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  const std::string where =
      absl::StrCat("NCCL group '", name_, "' (rank ", rank_, " of ", size_, "): ", what);
  FLEET_ENFORCE(!s.broken, Unavailable, where,
                ": the group broke in an earlier call; create a new one");
  cudaSetDevice(s.device);
  const size_t c = s.next++ % s.comms.size();
  ncclComm_t comm = s.comms[c];
  cudaStream_t stream = s.streams[c];
  const auto deadline = Clock::now() + timeout;
  // The call check: every rank's description, gathered, compared with rank 0's.
  detail::CallSignature signed_call = mine;
  signed_call.sequence = s.sequence++;
  const size_t sig = sizeof(detail::CallSignature);
  auto* gathered = static_cast<char*>(s.scratch);
  cudaError_t e =
      cudaMemcpyAsync(gathered + rank_ * sig, &signed_call, sig, cudaMemcpyHostToDevice, stream);
  FLEET_ENFORCE(e == cudaSuccess, Unavailable, where, ": cudaMemcpyAsync: ", CudaError(e));
  ncclResult_t r = ncclAllGather(gathered + rank_ * sig, gathered, sig, ncclUint8, comm, stream);
  if (r == ncclInProgress) AwaitComm(comm, deadline, where, &s.broken);
  FLEET_ENFORCE(r == ncclSuccess || r == ncclInProgress, Unavailable, where,
                ": call check: ", NcclError(r));
  std::vector<detail::CallSignature> calls(size_);
  e = cudaMemcpyAsync(calls.data(), gathered, sig * size_, cudaMemcpyDeviceToHost, stream);
  FLEET_ENFORCE(e == cudaSuccess, Unavailable, where, ": cudaMemcpyAsync: ", CudaError(e));
  AwaitStream(comm, stream, deadline, absl::StrCat(where, " (call check)"), &s.broken);
  std::vector<std::string> differing;
  for (int i = 1; i < size_; ++i) {
    detail::CallSignature a = calls[0], b = calls[i];
    a.sequence = b.sequence = 0;
    if (std::memcmp(&a, &b, sig) != 0) {
      differing.push_back(absl::StrCat("rank ", i, " calls ", detail::DescribeCall(calls[i])));
    }
  }
  FLEET_ENFORCE(differing.empty(), InvalidArgument, where, ": the ranks disagree: rank 0 calls ",
                detail::DescribeCall(calls[0]), ", ", absl::StrJoin(differing, ", "));
  r = static_cast<ncclResult_t>(enqueue(c));
  if (r == ncclInProgress) AwaitComm(comm, deadline, where, &s.broken);
  FLEET_ENFORCE(r == ncclSuccess || r == ncclInProgress, Unavailable, where, ": ", NcclError(r));
  AwaitStream(comm, stream, deadline, where, &s.broken);
}

void NcclBackend::AllReduce(const void* in, void* out, size_t count, DType dtype,
                            const AllReduceOptions& options) {
  const std::string what = "all-reduce";
  const ncclDataType_t type = NcclType(dtype, what);
  auto call = detail::MakeSignature(detail::kAllReduce, DTypeName(dtype), options.shape,
                                    count * SizeOf(dtype), static_cast<int>(options.op), -1, 0);
  Call(call, options.timeout, what, [&](size_t c) {
    return static_cast<int>(ncclAllReduce(in, out, count, type, NcclOp(options.op),
                                          state_->comms[c], state_->streams[c]));
  });
}

void NcclBackend::AllGather(const void* in, void* out, size_t bytes_per_rank,
                            const AllGatherOptions& options) {
  auto call = detail::MakeSignature(detail::kAllGather, options.element_type, options.shape,
                                    bytes_per_rank, -1, -1, 0);
  Call(call, options.timeout, "all-gather", [&](size_t c) {
    return static_cast<int>(
        ncclAllGather(in, out, bytes_per_rank, ncclUint8, state_->comms[c], state_->streams[c]));
  });
}

void NcclBackend::Broadcast(void* data, size_t bytes, const BroadcastOptions& options) {
  FLEET_ENFORCE(options.root >= 0 && options.root < size_, InvalidArgument, "NCCL group '", name_,
                "': broadcast root ", options.root, " is not a rank of ", size_);
  auto call = detail::MakeSignature(detail::kBroadcast, options.element_type, options.shape, bytes,
                                    -1, options.root, 0);
  Call(call, options.timeout, "broadcast", [&](size_t c) {
    return static_cast<int>(ncclBroadcast(data, data, bytes, ncclUint8, options.root,
                                          state_->comms[c], state_->streams[c]));
  });
}

void NcclBackend::Barrier(const BarrierOptions& options) {
  // The call check is itself an all-gather of every rank: nothing more to move.
  auto call = detail::MakeSignature(detail::kBarrier, "", {}, 0, -1, -1, 0);
  Call(call, options.timeout, "barrier", [](size_t) { return static_cast<int>(ncclSuccess); });
}

}  // namespace fleet::collective
