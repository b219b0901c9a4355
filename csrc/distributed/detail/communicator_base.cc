#include "distributed/detail/communicator_base.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace fleet::distributed::detail {
namespace {

// Forwards the executor's step hooks to the communicator. Holds it weakly: the communicator owns
// the hook, and a hook left registered after the communicator is gone does nothing.
//
// It also tells when a step raised: a thread that began a step (BeforeStep) and ends (its
// OnThreadEnd, or the pass's end) without finishing it (AfterStep returned) failed in between,
// in a kernel, an op's call to the servers or a hook; so did any hook call that throws.
class CommunicatorHook : public framework::StepHook {
 public:
  explicit CommunicatorHook(CommunicatorBase* owner) : owner_(owner) {}
  void PrepareThreadScope(int thread, Scope* scope) override {
    Guard("the start of a pass", [&] { owner_->PrepareThreadScope(thread, scope); });
  }
  void OnPassBegin(const framework::PassInfo& pass) override {
    in_step_.assign(static_cast<size_t>(std::max(pass.num_threads, 1)), 0);
    Guard("the start of a pass", [&] { owner_->OnPassBegin(pass); });
  }
  void BeforeStep(const framework::StepInfo& info) override {
    Slot(info.thread) = 1;
    Guard("a step", [&] { owner_->BeforeStep(info); });
  }
  void AfterStep(const framework::StepInfo& info) override {
    Guard("a step", [&] { owner_->AfterStep(info); });
    Slot(info.thread) = 0;
  }
  void OnBatchAhead(const framework::StepInfo& next) override {
    Guard("a step", [&] { owner_->OnBatchAhead(next); });
  }
  int BatchesAhead() const override { return owner_->BatchesAhead(); }
  void OnThreadEnd(int thread) override {
    if (Slot(thread) != 0) owner_->MarkFailed("a step raised");
    Guard("the end of a thread", [&] { owner_->OnThreadEnd(thread); });
  }
  void OnPassEnd() override {
    for (char busy : in_step_) {
      if (busy != 0) owner_->MarkFailed("a step raised");
    }
    Guard("the end of a pass", [&] { owner_->OnPassEnd(); });
  }
  std::string Name() const override {
    return absl::StrCat(PsModeName(owner_->config().mode), " communicator");
  }

 private:
  // Each thread writes its own slot only; the pass's end reads them after every thread ended.
  char& Slot(int thread) {
    const size_t t = static_cast<size_t>(thread);
    if (t >= in_step_.size()) in_step_.resize(t + 1, 0);  // only before threads start
    return in_step_[t];
  }
  template <class Fn>
  void Guard(const char* where, Fn&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      owner_->MarkFailed(absl::StrCat(where, " failed: ", e.what()));
      throw;
    }
  }

  CommunicatorBase* owner_;
  std::vector<char> in_step_;
};

}  // namespace

void WaitOk(const ps::Future& future, const std::string& what) {
  ThrowIfError(future.Wait(), what);
}

void ThrowIfError(const absl::Status& status, const std::string& what) {
  ::fleet::ThrowIfError(status, what);
}

CommunicatorBase::CommunicatorBase(CommunicatorConfig config, std::shared_ptr<ps::PsClient> client,
                                   Scope* root)
    : config_(std::move(config)), client_(std::move(client)), root_(root) {
  FLEET_ENFORCE(client_ != nullptr && root_ != nullptr, InvalidArgument,
                "a communicator needs a PS client and a root scope");
  FLEET_ENFORCE(config_.num_workers > 0 && config_.worker_id < config_.num_workers, InvalidArgument,
                "communicator: worker_id ", config_.worker_id,
                " is not in [0, num_workers=", config_.num_workers, ")");
  for (const DenseVar& var : config_.dense) {
    FLEET_ENFORCE(var.offset == dense_size_, InvalidArgument, "communicator: dense variable '",
                  var.param, "' starts at ", var.offset, ", expected ", dense_size_,
                  " (dense variables are packed in order)");
    dense_size_ += var.numel;
  }
  FLEET_ENFORCE(config_.dense.empty() == !config_.dense_table_id.has_value(), InvalidArgument,
                "communicator: dense variables need a dense table id and vice versa");
  if (config_.dense_table_id) {
    auto table = client_->Table(*config_.dense_table_id);
    ThrowIfError(table.status(), "communicator: dense table");
    FLEET_ENFORCE(table->dim() == dense_size_, InvalidArgument, "communicator: dense table ",
                  *config_.dense_table_id, " holds ", table->dim(),
                  " floats on the servers, the program's dense parameters ", dense_size_);
  }
  for (const SparseVar& var : config_.sparse) {
    auto table = client_->Table(var.table_id);
    ThrowIfError(table.status(), absl::StrCat("communicator: sparse table of '", var.name, "'"));
    FLEET_ENFORCE(table->dim() == var.dim, InvalidArgument, "communicator: sparse table ",
                  var.table_id, " ('", var.name, "') has dim ", table->dim(),
                  " on the servers, the program ", var.dim);
  }
  hook_ = std::make_shared<CommunicatorHook>(this);
}

void CommunicatorBase::MarkFailed(const std::string& why) {
  if (failed_.exchange(true, std::memory_order_acq_rel)) return;
  // Tell the servers at once, so that the others stop waiting for this worker; bounded by the
  // client's RPC timeout, and best effort: a server that cannot be told is what failed.
  (void)client_->ReportFailure(config_.worker_id, why);
}

const SparseVar& CommunicatorBase::Sparse(uint32_t table_id) const {
  for (const SparseVar& var : config_.sparse) {
    if (var.table_id == table_id) return var;
  }
  throw NotFound(absl::StrCat("communicator: no sparse table ", table_id,
                              " (the program and fleet.init_worker disagree)"));
}

size_t CommunicatorBase::CheckPushSize(uint32_t table_id, absl::Span<const int64_t> keys,
                                       absl::Span<const float> grads) const {
  const size_t dim = Sparse(table_id).dim;
  FLEET_ENFORCE(grads.size() == keys.size() * dim, InvalidArgument, "push_sparse of table ",
                table_id, ": ", keys.size(), " ids need ", keys.size() * dim,
                " gradient values, got ", grads.size());
  return dim;
}

void CommunicatorBase::PullSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                                  absl::Span<float> out, bool from_servers) {
  PullFromServers(table_id, keys, out);
}

std::shared_ptr<Buffer> CommunicatorBase::RowsBuffer(size_t floats, absl::Span<float>* span) {
  auto rows = std::make_shared<Buffer>(floats * sizeof(float));
  *span = absl::MakeSpan(static_cast<float*>(rows->data()), floats);
  return rows;
}

std::shared_ptr<Buffer> CommunicatorBase::PullSparseRows(int thread, uint32_t table_id,
                                                         absl::Span<const int64_t> keys, size_t dim,
                                                         bool from_servers) {
  absl::Span<float> out;
  std::shared_ptr<Buffer> rows = RowsBuffer(keys.size() * dim, &out);
  PullSparse(thread, table_id, keys, out, from_servers);
  return rows;
}

void CommunicatorBase::PushSparseOwned(int thread, uint32_t table_id, std::vector<int64_t> keys,
                                       std::vector<float> grads) {
  PushSparse(thread, table_id, keys, grads);
}

void CommunicatorBase::PullFromServers(uint32_t table_id, absl::Span<const int64_t> keys,
                                       absl::Span<float> out) {
  WaitOk(client_->PullSparse(table_id, keys, out),
         absl::StrCat("pull_sparse of '", Sparse(table_id).name, "'"));
}

std::vector<LoDTensor*> CommunicatorBase::DenseParams(const Scope* scope) const {
  std::vector<LoDTensor*> params;
  for (const DenseVar& var : config_.dense) {
    Variable* v = scope->FindVar(var.param);
    FLEET_ENFORCE(v != nullptr && v->IsType<LoDTensor>(), NotFound, "dense parameter '", var.param,
                  "' is not a tensor in the root scope (run the startup program first)");
    LoDTensor* t = v->GetMutable<LoDTensor>();
    FLEET_ENFORCE(t->initialized() && static_cast<size_t>(t->numel()) == var.numel &&
                      t->dtype() == DType::kFloat32,
                  InvalidArgument, "dense parameter '", var.param, "' holds ",
                  t->initialized() ? t->numel() : 0, " values, the PS program expects ", var.numel,
                  " float32");
    params.push_back(t);
  }
  return params;
}

void CommunicatorBase::CheckDenseGradCount(const std::vector<const LoDTensor*>& grads) const {
  FLEET_ENFORCE(grads.size() == config_.dense.size(), InvalidArgument, "send: got ", grads.size(),
                " dense gradients, the communicator has ", config_.dense.size(),
                " dense parameters");
}

const float* CommunicatorBase::DenseGrad(const std::vector<const LoDTensor*>& grads,
                                         size_t i) const {
  const DenseVar& var = config_.dense[i];
  const LoDTensor* g = grads[i];
  FLEET_ENFORCE(g->initialized() && static_cast<size_t>(g->numel()) == var.numel &&
                    g->dtype() == DType::kFloat32,
                InvalidArgument, "send: gradient '", var.grad, "' holds ",
                g->initialized() ? g->numel() : 0, " values, expected ", var.numel,
                " float32 like '", var.param, "'");
  return g->data<float>();
}

void CommunicatorBase::GatherDense(const std::vector<const LoDTensor*>& grads, float* out,
                                   bool add) const {
  CheckDenseGradCount(grads);
  for (size_t i = 0; i < config_.dense.size(); ++i) {
    const DenseVar& var = config_.dense[i];
    const float* src = DenseGrad(grads, i);
    float* dst = out + var.offset;
    if (add) {
      for (size_t j = 0; j < var.numel; ++j) dst[j] += src[j];
    } else {
      std::memcpy(dst, src, var.numel * sizeof(float));
    }
  }
}

void CommunicatorBase::GatherDense(const std::vector<const LoDTensor*>& grads,
                                   ps::PsClient::DenseShares* out, bool add) const {
  CheckDenseGradCount(grads);
  for (size_t i = 0; i < config_.dense.size(); ++i) {
    const DenseVar& var = config_.dense[i];
    ThrowIfError(out->Write(var.offset, DenseGrad(grads, i), var.numel, add), "send");
  }
}

void CommunicatorBase::ReadDenseParams(float* out) const {
  auto params = DenseParams(root_);
  for (size_t i = 0; i < params.size(); ++i) {
    std::memcpy(out + config_.dense[i].offset, params[i]->data<float>(),
                config_.dense[i].numel * sizeof(float));
  }
}

void CommunicatorBase::WriteDenseParams(const float* values, const Scope* scope) const {
  // In place, element by element: trainer threads may be reading (see framework/executor.h).
  auto params = DenseParams(scope != nullptr ? scope : root_);
  for (size_t i = 0; i < params.size(); ++i) {
    std::memcpy(params[i]->mutable_data<float>(), values + config_.dense[i].offset,
                config_.dense[i].numel * sizeof(float));
  }
}

void CommunicatorBase::ShareDenseParams(const std::shared_ptr<Buffer>& values,
                                        const Scope* scope) const {
  FLEET_ENFORCE(values != nullptr && values->size() >= dense_size_ * sizeof(float), InvalidArgument,
                "communicator: shared dense values hold ", values == nullptr ? 0 : values->size(),
                " bytes, the dense parameters ", dense_size_ * sizeof(float));
  Tensor packed;
  packed.ResetBuffer(values, DType::kFloat32, {static_cast<int64_t>(dense_size_)});
  auto params = DenseParams(scope);
  for (size_t i = 0; i < params.size(); ++i) {
    const DenseVar& var = config_.dense[i];
    Tensor view = packed.Slice(static_cast<int64_t>(var.offset),
                               static_cast<int64_t>(var.offset + var.numel));
    view.Resize(params[i]->shape());
    params[i]->ShareDataWith(view);  // keeps the parameter's LoD
  }
}

float* CommunicatorBase::PackedRootDenseParams(std::shared_ptr<Buffer>* packed) const {
  const std::vector<LoDTensor*> params = DenseParams(root_);
  float* base = *packed == nullptr ? nullptr : static_cast<float*>((*packed)->data());
  bool viewed = base != nullptr;
  for (size_t i = 0; viewed && i < params.size(); ++i) {
    viewed = params[i]->data<float>() == base + config_.dense[i].offset;
  }
  if (viewed) return base;
  if (base == nullptr) {
    *packed = std::make_shared<Buffer>(dense_size_ * sizeof(float));
    base = static_cast<float*>((*packed)->data());
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const float* from = params[i]->data<float>();
    float* to = base + config_.dense[i].offset;
    if (from != to) std::memcpy(to, from, config_.dense[i].numel * sizeof(float));
  }
  ShareDenseParams(*packed, root_);
  return base;
}

void CommunicatorBase::RebaseDenseParams(const float* fresh, float* synced) const {
  auto params = DenseParams(root_);
  for (size_t i = 0; i < params.size(); ++i) {
    float* param = params[i]->mutable_data<float>();
    const size_t offset = config_.dense[i].offset;
    for (size_t j = 0; j < config_.dense[i].numel; ++j) {
      param[j] = fresh[offset + j] + (param[j] - synced[offset + j]);
      synced[offset + j] = fresh[offset + j];
    }
  }
}

void CommunicatorBase::CopyDenseParamsInto(Scope* scope) const {
  const std::vector<LoDTensor*> params = DenseParams(root_);
  for (size_t i = 0; i < params.size(); ++i) {
    LoDTensor* copy = scope->Var(config_.dense[i].param)->GetMutable<LoDTensor>();
    copy->CopyFrom(*params[i]);
    copy->set_lod(params[i]->lod());
  }
}

void CommunicatorBase::PullDenseIntoRoot(std::vector<float>* into) {
  if (!config_.dense_table_id) return;
  std::vector<float> local;
  std::vector<float>& values = into != nullptr ? *into : local;
  values.resize(dense_size_);
  WaitOk(client_->PullDense(*config_.dense_table_id, absl::MakeSpan(values)),
         "pull of the dense parameters");
  WriteDenseParams(values.data());
}

void CommunicatorBase::Start() {
  if (config_.dense_table_id && config_.worker_id == 0) {
    std::vector<float> start(dense_size_);
    ReadDenseParams(start.data());
    WaitOk(client_->PushDense(*config_.dense_table_id, start, ps::PushKind::kInitialize),
           "init_worker: worker 0's start-up dense values");
  }
  WaitOk(client_->Barrier("__init_worker__", config_.num_workers, config_.worker_id,
                          config_.step_timeout),
         absl::StrCat("init_worker: waiting for all ", config_.num_workers, " workers"));
  // From here the servers know this worker is alive by an open call: if its process dies, they
  // fail the other workers' barriers naming it (PsClient::Attend).
  client_->Attend(config_.worker_id);
  PullDenseIntoRoot();
  StartThreads();
}

void CommunicatorBase::Leave() {
  ThrowIfError(client_->Leave(config_.worker_id),
               absl::StrCat("stop_worker: worker ", config_.worker_id, "'s goodbye"));
}

void CommunicatorBase::DestroyedWithoutStop() {
  MarkFailed(absl::StrCat("its communicator ended without fleet.stop_worker() (the script ",
                          "ended on an error, or never called it)"));
}

}  // namespace fleet::distributed::detail
