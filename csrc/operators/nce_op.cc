// nce: noise-contrastive estimation (Gutmann & Hyvarinen, 2010; Mnih & Teh, 2012), the loss of
// fluid.layers.nce that word2vec trains with, with the slots and attributes of Paddle's op.
//
// For sample i with true classes Label[i, :] and num_neg_samples classes drawn from a noise
// distribution P, each class c of the row gets o = sigmoid(Input[i] . Weight[c] + Bias[c]) and,
// with b = P(c) * num_neg_samples,
//   cost_i = sum over true c of -log(o / (o + b)) + sum over noise c of -log(b / (o + b)),
// times SampleWeight[i] when given. SampleLogits holds o and SampleLabels the classes (true
// ones first), so the gradient reads the same samples.
//
// Samplers (attribute `sampler`): 0 uniform over [0, num_total_classes); 1 log-uniform (Zipf-like:
// P(c) = log((c + 2) / (c + 1)) / log(num_total_classes + 1)); 2 custom, drawn by Walker's alias
// method from CustomDistProbs / CustomDistAlias / CustomDistAliasProbs (tables Python builds
// once). The generator is seeded from the run's generator mixed with attribute `seed`, so a
// program with a fixed seed draws the same noise on every run of the job and new noise each step.
// `custom_neg_classes`, when set, fixes the noise classes (tests).

#include <cmath>
#include <random>

#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

enum SamplerKind : int { kUniform = 0, kLogUniform = 1, kCustom = 2 };

// The noise distribution: draws classes and gives their probabilities.
class Sampler {
 public:
  Sampler(const ExecutionContext& ctx, int64_t num_classes) : num_classes_(num_classes) {
    kind_ = ctx.Attr<int32_t>("sampler", kUniform);
    FLEET_KERNEL_ENFORCE(ctx, kind_ >= kUniform && kind_ <= kCustom, "sampler ", kind_,
                         " is unknown: 0 uniform, 1 log_uniform, 2 custom_dist");
    log_range_ = std::log(static_cast<double>(num_classes) + 1);
    if (kind_ == kCustom) {
      for (const char* slot : {"CustomDistProbs", "CustomDistAlias", "CustomDistAliasProbs"}) {
        FLEET_KERNEL_ENFORCE(ctx, ctx.HasInput(slot) && ctx.Input(slot).numel() == num_classes,
                             "the custom sampler needs ", slot, " with ", num_classes,
                             " entries (one per class)");
      }
      probs_ = FloatData(ctx, "CustomDistProbs");
      alias_ = ctx.Input("CustomDistAlias").data<int64_t>();
      alias_probs_ = FloatData(ctx, "CustomDistAliasProbs");
    }
  }

  int64_t Sample(std::mt19937_64* engine) const {
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    if (kind_ == kUniform) {
      return std::uniform_int_distribution<int64_t>(0, num_classes_ - 1)(*engine);
    }
    if (kind_ == kLogUniform) {
      const auto c = static_cast<int64_t>(std::exp(unit(*engine) * log_range_)) - 1;
      return c % num_classes_;
    }
    const int64_t column = std::uniform_int_distribution<int64_t>(0, num_classes_ - 1)(*engine);
    return unit(*engine) < alias_probs_[column] ? column : alias_[column];
  }

  double Probability(int64_t c) const {
    if (kind_ == kUniform) return 1.0 / static_cast<double>(num_classes_);
    if (kind_ == kLogUniform) return std::log((c + 2.0) / (c + 1.0)) / log_range_;
    return probs_[c];
  }

 private:
  int kind_ = kUniform;
  int64_t num_classes_;
  double log_range_ = 0;
  const float* probs_ = nullptr;
  const int64_t* alias_ = nullptr;
  const float* alias_probs_ = nullptr;
};

// Sizes and inputs shared by forward and backward.
struct NceShapes {
  int64_t batch = 0, dim = 0, num_true = 0, num_neg = 0, num_classes = 0;
  int64_t width() const { return num_true + num_neg; }
};

NceShapes CheckShapes(const ExecutionContext& ctx) {
  const LoDTensor& input = ctx.Input("Input");
  const LoDTensor& label = ctx.Input("Label");
  const LoDTensor& weight = ctx.Input("Weight");
  NceShapes s;
  s.num_classes = ctx.Attr<int64_t>("num_total_classes");
  s.num_neg = ctx.Attr<int64_t>("num_neg_samples", 10);
  FLEET_KERNEL_ENFORCE(ctx, input.rank() == 2, "Input must be [batch, dim], got ",
                       ShapeToString(input.shape()));
  s.batch = input.dim(0);
  s.dim = input.dim(1);
  FLEET_KERNEL_ENFORCE(ctx,
                       label.dtype() == DType::kInt64 && label.numel() % s.batch == 0 &&
                           (s.batch > 0 || label.numel() == 0),
                       "Label must be int64 [batch, num_true] for batch ", s.batch, ", got ",
                       DTypeName(label.dtype()), " ", ShapeToString(label.shape()));
  s.num_true = s.batch == 0 ? 1 : label.numel() / s.batch;
  FLEET_KERNEL_ENFORCE(ctx, weight.shape() == Shape({s.num_classes, s.dim}), "Weight has shape ",
                       ShapeToString(weight.shape()),
                       ", expected [num_total_classes=", s.num_classes, ", ", s.dim, "]");
  if (ctx.HasInput("Bias")) {
    FLEET_KERNEL_ENFORCE(ctx, ctx.Input("Bias").numel() == s.num_classes, "Bias has shape ",
                         ShapeToString(ctx.Input("Bias").shape()), ", expected [", s.num_classes,
                         ", 1]");
  }
  return s;
}

float SampleWeight(const ExecutionContext& ctx, int64_t i) {
  return ctx.HasInput("SampleWeight") ? FloatData(ctx, "SampleWeight")[i] : 1.f;
}

void NceKernel(const ExecutionContext& ctx) {
  const NceShapes s = CheckShapes(ctx);
  const Sampler sampler(ctx, s.num_classes);
  const int64_t seed = ctx.Attr<int64_t>("seed", 0);
  std::mt19937_64 engine(ctx.rng()() ^ static_cast<uint64_t>(seed));
  const auto fixed_negatives = ctx.Attr<std::vector<int64_t>>("custom_neg_classes", {});
  FLEET_KERNEL_ENFORCE(
      ctx, fixed_negatives.empty() || static_cast<int64_t>(fixed_negatives.size()) == s.num_neg,
      "custom_neg_classes must hold num_neg_samples=", s.num_neg, " classes");
  const int64_t* labels = ctx.Input("Label").data<int64_t>();
  const float* x = FloatData(ctx, "Input");
  const float* w = FloatData(ctx, "Weight");
  const float* bias = ctx.HasInput("Bias") ? FloatData(ctx, "Bias") : nullptr;

  const Shape sample_shape = {s.batch, s.width()};
  LoDTensor* sample_labels_t = ctx.Output("SampleLabels");
  sample_labels_t->Resize(sample_shape);
  int64_t* sample_labels = sample_labels_t->mutable_data<int64_t>();
  LoDTensor* logits_t = ctx.Output("SampleLogits");
  logits_t->Resize(sample_shape);
  float* logits = logits_t->mutable_data<float>();
  LoDTensor* cost_t = ctx.Output("Cost");
  cost_t->Resize({s.batch, 1});
  cost_t->set_lod({});
  float* cost = cost_t->mutable_data<float>();

  for (int64_t i = 0; i < s.batch; ++i) {
    double total = 0;
    for (int64_t j = 0; j < s.width(); ++j) {
      int64_t c;
      if (j < s.num_true) {
        c = labels[i * s.num_true + j];
      } else {
        c = fixed_negatives.empty() ? sampler.Sample(&engine) : fixed_negatives[j - s.num_true];
      }
      FLEET_KERNEL_ENFORCE(ctx, c >= 0 && c < s.num_classes, "class ", c, " (sample ", i,
                           ") is outside [0, num_total_classes=", s.num_classes, ")");
      double z = bias == nullptr ? 0.0 : bias[c];
      for (int64_t d = 0; d < s.dim; ++d) z += double{x[i * s.dim + d]} * w[c * s.dim + d];
      const double o = 1.0 / (1.0 + std::exp(-z));
      const double b = sampler.Probability(c) * s.num_neg;
      total += j < s.num_true ? -std::log(o / (o + b)) : -std::log(b / (o + b));
      sample_labels[i * s.width() + j] = c;
      logits[i * s.width() + j] = static_cast<float>(o);
    }
    cost[i] = static_cast<float>(total * SampleWeight(ctx, i));
  }
}

// d cost / d z for o = sigmoid(z): true class b (o - 1) / (o + b), noise class o (1 - o) / (o + b).
void NceGradKernel(const ExecutionContext& ctx) {
  const NceShapes s = CheckShapes(ctx);
  const Sampler sampler(ctx, s.num_classes);
  const int64_t* sample_labels = ctx.Input("SampleLabels").data<int64_t>();
  const float* logits = FloatData(ctx, "SampleLogits");
  const float* dcost = FloatData(ctx, "Cost@GRAD");
  const float* x = FloatData(ctx, "Input");
  const float* w = FloatData(ctx, "Weight");
  const int64_t n = s.batch * s.width();
  std::vector<float> dz(n);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = k / s.width();
    const double o = logits[k];
    const double b = sampler.Probability(sample_labels[k]) * s.num_neg;
    const double g = (k % s.width()) < s.num_true ? b * (o - 1) / (o + b) : o * (1 - o) / (o + b);
    dz[k] = static_cast<float>(g * SampleWeight(ctx, i) * dcost[i]);
  }
  if (ctx.HasOutput("Input@GRAD")) {
    float* dx = ResizeLike(ctx.Input("Input"), ctx.Output("Input@GRAD"));
    std::fill(dx, dx + s.batch * s.dim, 0.f);
    for (int64_t k = 0; k < n; ++k) {
      const float* row = w + sample_labels[k] * s.dim;
      float* out = dx + (k / s.width()) * s.dim;
      for (int64_t d = 0; d < s.dim; ++d) out[d] += dz[k] * row[d];
    }
  }
  if (ctx.HasOutput("Bias@GRAD")) {
    float* db = ResizeLike(ctx.Input("Bias"), ctx.Output("Bias@GRAD"));
    std::fill(db, db + s.num_classes, 0.f);
    for (int64_t k = 0; k < n; ++k) db[sample_labels[k]] += dz[k];
  }
  if (!ctx.HasOutput("Weight@GRAD")) return;
  if (ctx.Attr<bool>("is_sparse", false)) {
    // One row per sampled class, duplicates kept for the optimizer to merge.
    auto* grad = ctx.OutputVar("Weight@GRAD")->GetMutable<SelectedRows>();
    grad->set_height(s.num_classes);
    grad->mutable_rows()->assign(sample_labels, sample_labels + n);
    Tensor* value = grad->mutable_value();
    value->Resize({n, s.dim});
    float* dst = value->mutable_data<float>();
    for (int64_t k = 0; k < n; ++k) {
      const float* xi = x + (k / s.width()) * s.dim;
      for (int64_t d = 0; d < s.dim; ++d) dst[k * s.dim + d] = dz[k] * xi[d];
    }
    return;
  }
  float* dw = ResizeLike(ctx.Input("Weight"), ctx.Output("Weight@GRAD"));
  std::fill(dw, dw + s.num_classes * s.dim, 0.f);
  for (int64_t k = 0; k < n; ++k) {
    const float* xi = x + (k / s.width()) * s.dim;
    float* row = dw + sample_labels[k] * s.dim;
    for (int64_t d = 0; d < s.dim; ++d) row[d] += dz[k] * xi[d];
  }
}

void InferNce(InferShapeContext* ctx) {
  const VarInfo& input = ctx->Input("Input");
  const VarInfo& label = ctx->Input("Label");
  FLEET_ENFORCE(input.shape.size() == 2 && label.dtype == DType::kInt64, InvalidArgument, "op ",
                ctx->op().Describe(), ": Input must be [batch, dim] (got ",
                ShapeToString(input.shape), ") and Label int64 (got ", DTypeName(label.dtype), ")");
  const int64_t num_true = label.shape.size() == 2 ? label.shape[1] : 1;
  const int64_t width = num_true < 0 ? -1 : num_true + ctx->Attr<int64_t>("num_neg_samples", 10);
  VarInfo cost;
  cost.shape = {input.shape[0], 1};
  ctx->SetOutput("Cost", cost);
  VarInfo logits;
  logits.shape = {input.shape[0], width};
  ctx->SetOutput("SampleLogits", logits);
  logits.dtype = DType::kInt64;
  ctx->SetOutput("SampleLabels", logits);
}

void InferNceGrad(InferShapeContext* ctx) {
  for (const char* slot : {"Input", "Weight", "Bias"}) {
    const std::string grad = absl::StrCat(slot, "@GRAD");
    if (!ctx->HasOutput(grad)) continue;
    VarInfo info = ctx->Input(slot);
    info.lod_level = 0;
    if (std::string(slot) == "Weight" && ctx->Attr<bool>("is_sparse", false)) {
      info.kind = framework::VarKind::kSelectedRows;
    }
    ctx->SetOutput(grad, info);
  }
}

}  // namespace

void RegisterNceOps(OpRegistry* registry) {
  OpInfo& nce = registry->Register("nce");
  nce.infer_shape = InferNce;
  nce.grad_maker = framework::SingleGradOp(
      {"Input", "Label", "Weight", "Bias", "SampleWeight", "CustomDistProbs", "CustomDistAlias",
       "CustomDistAliasProbs"},
      {"SampleLogits", "SampleLabels"}, {"Cost"}, {"Input", "Weight", "Bias"});
  SetCpuKernel(&nce, NceKernel);
  OpInfo& grad = registry->Register("nce_grad");
  grad.infer_shape = InferNceGrad;
  SetCpuKernel(&grad, NceGradKernel);
}

}  // namespace fleet::operators
