// The NCCL backend of a build without CUDA or NCCL (nccl_backend.cc otherwise): it says so.
#include "absl/strings/str_cat.h"
#include "collective/nccl_backend.h"
#include "core/errors.h"

namespace fleet::collective {
namespace {

[[noreturn]] void NotBuilt(const std::string& what) {
  throw Unavailable(absl::StrCat(what,
                                 ": this build of Fleet has no NCCL backend (it was built "
                                 "without CUDA or without NCCL); use the Gloo backend"));
}

}  // namespace

bool nccl_compiled() { return false; }
int cuda_device_count() { return 0; }

std::unique_ptr<NcclBackend> NcclBackend::Connect(Store*, int rank, int size,
                                                  const NcclOptions& options) {
  NotBuilt(absl::StrCat("NCCL group '", options.name, "' (rank ", rank, " of ", size, ")"));
}

struct NcclBackend::State {};
NcclBackend::NcclBackend(int rank, int size, std::string name, std::unique_ptr<State> state)
    : rank_(rank), size_(size), name_(std::move(name)), state_(std::move(state)) {}
NcclBackend::~NcclBackend() = default;
int NcclBackend::comm_num() const { return 0; }
void NcclBackend::Call(const detail::CallSignature&, Duration, const std::string& what,
                       const std::function<int(size_t)>&) {
  NotBuilt(what);
}
void NcclBackend::AllReduce(const void*, void*, size_t, DType, const AllReduceOptions&) {
  NotBuilt("NCCL all-reduce");
}
void NcclBackend::AllGather(const void*, void*, size_t, const AllGatherOptions&) {
  NotBuilt("NCCL all-gather");
}
void NcclBackend::Broadcast(void*, size_t, const BroadcastOptions&) { NotBuilt("NCCL broadcast"); }
void NcclBackend::Barrier(const BarrierOptions&) { NotBuilt("NCCL barrier"); }

}  // namespace fleet::collective
