#pragma once
// What every communicator mode shares: the client, the config, the packed dense table (gather
// gradients, pull values into the root scope), the start-up handshake, and the StepHook that
// forwards to the mode's methods.

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace fleet::distributed::detail {

// Waits for a PS future; throws the fleet error of its status (the endpoint is in the message).
void WaitOk(const ps::Future& future, const std::string& what);
// Throws the fleet error of a non-OK status, prefixed by `what`.
void ThrowIfError(const absl::Status& status, const std::string& what);

class CommunicatorBase : public Communicator {
 public:
  CommunicatorBase(CommunicatorConfig config, std::shared_ptr<ps::PsClient> client, Scope* root);

  void PullSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                  absl::Span<float> out, bool from_servers) override;
  // A new buffer (not zeroed: the pull writes every row) filled by the mode's PullSparse.
  std::shared_ptr<Buffer> PullSparseRows(int thread, uint32_t table_id,
                                         absl::Span<const int64_t> keys, size_t dim,
                                         bool from_servers) override;
  // The mode's PushSparse of the vectors (which copies them).
  void PushSparseOwned(int thread, uint32_t table_id, std::vector<int64_t> keys,
                       std::vector<float> grads) override;
  void Start() override;
  std::vector<std::shared_ptr<framework::StepHook>> hooks() override { return {hook_}; }
  const CommunicatorConfig& config() const override { return config_; }
  ps::PsClient& client() override { return *client_; }

  // Whether a step of this worker raised (a kernel, an op's RPC or a hook) or a flush failed.
  // A failed worker stops taking part in the job: Stop() then pushes nothing and meets nobody
  // (a peer may be dead or frozen; the job ends with the error already raised), and the servers
  // have been told, so that the other workers' next barrier fails naming this one.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Records the failure (once) and tells the servers; never throws.
  void MarkFailed(const std::string& why);

  // Hook entry points; the defaults do nothing.
  virtual void PrepareThreadScope(int thread, Scope* scope) {}
  virtual void OnPassBegin(const framework::PassInfo& pass) {}
  virtual void BeforeStep(const framework::StepInfo& info) {}
  virtual void AfterStep(const framework::StepInfo& info) {}
  virtual void OnBatchAhead(const framework::StepInfo& next) {}
  virtual int BatchesAhead() const { return 1; }
  virtual void OnThreadEnd(int thread) {}
  virtual void OnPassEnd() {}

 protected:
  size_t dense_size() const { return dense_size_; }
  const SparseVar& Sparse(uint32_t table_id) const;
  // Pulls the rows of `keys` from the servers and waits for them.
  void PullFromServers(uint32_t table_id, absl::Span<const int64_t> keys, absl::Span<float> out);
  // A buffer of `floats` floats, not zeroed, and the span over them.
  static std::shared_ptr<Buffer> RowsBuffer(size_t floats, absl::Span<float>* span);
  // The table's dim, after checking that `grads` holds one row per key (InvalidArgument).
  size_t CheckPushSize(uint32_t table_id, absl::Span<const int64_t> keys,
                       absl::Span<const float> grads) const;
  // Packs the gradients (one per DenseVar) into out[0, dense_size) times `scale`, added to what
  // is there when `add`.
  void GatherDense(const std::vector<const LoDTensor*>& grads, float* out, bool add) const;
  // Writes the gradients into `out`, each at its offset (added to what is there when `add`):
  // where the push sends them from.
  void GatherDense(const std::vector<const LoDTensor*>& grads, ps::PsClient::DenseShares* out,
                   bool add = false) const;
  // The root scope's dense parameters, packed.
  void ReadDenseParams(float* out) const;
  // Writes packed values into the dense parameters `scope` sees (default: the root scope's), in
  // place: same buffers.
  void WriteDenseParams(const float* values, const Scope* scope = nullptr) const;
  // Makes the dense parameters `scope` sees views of `values` (dense_size() packed floats), each
  // at its offset and with its shape: an install without a copy. Only for parameters that no
  // other thread reads meanwhile (a tensor's buffer is swapped, not written); the caller keeps
  // `values` unwritten while a view may hold it.
  void ShareDenseParams(const std::shared_ptr<Buffer>& values, const Scope* scope) const;
  // The root scope's dense parameters as one packed array that a pull may write in place of
  // WriteDenseParams: the parameters are views of `*packed` (allocated on first use). A
  // parameter that views other memory (the first call; a load that replaced a tensor's memory)
  // has its values copied in and becomes a view again, so the array always is the parameters.
  // Writing it has WriteDenseParams' contract: no step may be reading.
  float* PackedRootDenseParams(std::shared_ptr<Buffer>* packed) const;
  // The servers' fresh dense values into the root scope's parameters, keeping what the trainers
  // changed since `synced` was taken: param = fresh + (param - synced), then synced = fresh.
  // Element by element in place (trainer threads may be running), so an update made meanwhile is
  // lost only when it lands on the element being rebased.
  void RebaseDenseParams(const float* fresh, float* synced) const;
  // Gives `scope` its own copy of every dense parameter, with the root scope's values.
  void CopyDenseParamsInto(Scope* scope) const;
  // The end of a normal Stop(): tells the servers this worker leaves (its presence call ending
  // is then no failure). Throws the error of a server that cannot be told.
  void Leave();
  // For a destructor that runs before Stop(): the worker is counted as failed (and the servers
  // told), instead of a flush and barriers a destructor could wait on for minutes.
  void DestroyedWithoutStop();
  // Pulls the dense table and writes it into the root scope; `into` receives the values too.
  void PullDenseIntoRoot(std::vector<float>* into = nullptr);
  virtual void StartThreads() {}

  CommunicatorConfig config_;
  std::shared_ptr<ps::PsClient> client_;
  Scope* root_;

 private:
  // The dense parameters as `scope` sees them (its own or its ancestors').
  std::vector<LoDTensor*> DenseParams(const Scope* scope) const;
  // InvalidArgument unless a send has one gradient per dense variable.
  void CheckDenseGradCount(const std::vector<const LoDTensor*>& grads) const;
  // The values of gradient i of a send, checked against its dense variable (InvalidArgument).
  const float* DenseGrad(const std::vector<const LoDTensor*>& grads, size_t i) const;

  std::atomic<bool> failed_{false};
  size_t dense_size_ = 0;
  std::shared_ptr<framework::StepHook> hook_;
};

}  // namespace fleet::distributed::detail
