// Evaluation metrics (no gradients): accuracy and streaming auc, as Paddle fluid's ops of the
// same names.

#include <algorithm>
#include <cstring>

#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

// One int64 label per row of an input with `rows` rows.
const int64_t* Labels(const ExecutionContext& ctx, int64_t rows) {
  const LoDTensor& label = ctx.Input("Label");
  FLEET_KERNEL_ENFORCE(ctx, label.dtype() == DType::kInt64, "Label '", ctx.InputName("Label"),
                       "' is ", DTypeName(label.dtype()), ", expected int64");
  FLEET_KERNEL_ENFORCE(ctx, label.numel() == rows, "Label has shape ", ShapeToString(label.shape()),
                       ": expected one label for each of the ", rows, " rows");
  return label.data<int64_t>();
}

template <typename T>
T* ScalarOutput(const ExecutionContext& ctx, const std::string& slot) {
  LoDTensor* out = ctx.Output(slot);
  out->Resize({1});
  out->set_lod({});
  return out->mutable_data<T>();
}

// ---- accuracy ------------------------------------------------------------------------------

// Whether `label` is among the k largest of `p[0..classes)`: fewer than k classes rank above it,
// where a tie ranks the lower class index first (as a stable top-k would).
bool InTopK(const float* p, int64_t classes, int64_t label, int64_t k) {
  const float v = p[label];
  int64_t above = 0;
  for (int64_t j = 0; j < classes; ++j) above += p[j] > v || (p[j] == v && j < label);
  return above < k;
}

// Paddle's form: Indices [N, k] holds each row's top classes (from a top_k op).
int64_t CountInIndices(const ExecutionContext& ctx, const int64_t* label, int64_t n) {
  const LoDTensor& idx_t = ctx.Input("Indices");
  FLEET_KERNEL_ENFORCE(ctx,
                       idx_t.dtype() == DType::kInt64 && idx_t.rank() == 2 && idx_t.dim(0) == n,
                       "Indices must be int64 [", n, ", k], got ", DTypeName(idx_t.dtype()), " ",
                       ShapeToString(idx_t.shape()));
  const int64_t* idx = idx_t.data<int64_t>();
  const int64_t width = idx_t.dim(1);
  int64_t correct = 0;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t* row = idx + r * width;
    correct += std::find(row, row + width, label[r]) != row + width;
  }
  return correct;
}

// Inputs Out [N, C] (scores) and Label [N, 1]; attr k. Paddle's form, where top_k ran first and
// Indices [N, k] holds the top classes, is accepted too.
void AccuracyKernel(const ExecutionContext& ctx) {
  const LoDTensor& out_t = ctx.Input("Out");
  FLEET_KERNEL_ENFORCE(ctx, out_t.rank() == 2, "Out must be [batch, classes], got shape ",
                       ShapeToString(out_t.shape()));
  const int64_t n = out_t.dim(0);
  const int64_t classes = out_t.dim(1);
  const int64_t* label = Labels(ctx, n);
  const int64_t k = ctx.Attr<int64_t>("k", 1);
  FLEET_KERNEL_ENFORCE(ctx, k >= 1, "k must be >= 1, got ", k);
  int64_t correct = 0;
  if (ctx.HasInput("Indices")) {
    correct = CountInIndices(ctx, label, n);
  } else {
    const float* p = FloatData(ctx, "Out");
    for (int64_t r = 0; r < n; ++r) {
      FLEET_KERNEL_ENFORCE(ctx, label[r] >= 0 && label[r] < classes, "label value ", label[r],
                           " at row ", r, " is outside [0, ", classes, ")");
      correct += InTopK(p + r * classes, classes, label[r], k);
    }
  }
  *ScalarOutput<float>(ctx, "Accuracy") =
      n == 0 ? 0.f : static_cast<float>(static_cast<double>(correct) / static_cast<double>(n));
  if (ctx.HasOutput("Correct")) *ScalarOutput<int64_t>(ctx, "Correct") = correct;
  if (ctx.HasOutput("Total")) *ScalarOutput<int64_t>(ctx, "Total") = n;
}

void InferAccuracy(InferShapeContext* ctx) {
  ctx->SetOutput("Accuracy", VarInfo{{1}, DType::kFloat32});
  if (ctx->HasOutput("Correct")) ctx->SetOutput("Correct", VarInfo{{1}, DType::kInt64});
  if (ctx->HasOutput("Total")) ctx->SetOutput("Total", VarInfo{{1}, DType::kInt64});
}

// ---- auc -----------------------------------------------------------------------------------
//
// Streaming ROC AUC from histograms: a prediction p (the last column of Predict) falls in bin
// floor(p * num_thresholds) of StatPos (label 1) or StatNeg (label 0). With slide_steps = 0 the
// stats are [num_thresholds + 1] and accumulate over every batch. With slide_steps = k > 0 they
// are [(k + 1) * (num_thresholds + 1)]: k per-batch rows, oldest first, then their sum, and the
// AUC covers the last k batches. StatPosOut / StatNegOut are normally the same variables as
// StatPos / StatNeg, updated in place; distinct variables receive an updated copy.

struct AucConfig {
  int64_t buckets;  // num_thresholds + 1
  int64_t slide_steps;
  int64_t stat_size;
};

// Area under the ROC curve traced from the highest bin down, by trapezoids, as Paddle's
// calcAuc; 0 when either class is absent.
double CalcAuc(const int64_t* pos, const int64_t* neg, int64_t buckets) {
  double area = 0, tot_pos = 0, tot_neg = 0;
  for (int64_t b = buckets - 1; b >= 0; --b) {
    const double prev_pos = tot_pos, prev_neg = tot_neg;
    tot_pos += static_cast<double>(pos[b]);
    tot_neg += static_cast<double>(neg[b]);
    area += (tot_neg - prev_neg) * (tot_pos + prev_pos) / 2.0;
  }
  return tot_pos > 0 && tot_neg > 0 ? area / tot_pos / tot_neg : 0.0;
}

// The output stat tensor, holding the input's counts (in place when it is the same variable).
int64_t* StatOut(const ExecutionContext& ctx, const std::string& in_slot,
                 const std::string& out_slot, const AucConfig& c) {
  const LoDTensor& in = ctx.Input(in_slot);
  FLEET_KERNEL_ENFORCE(ctx, in.dtype() == DType::kInt64 && in.numel() == c.stat_size, in_slot, " '",
                       ctx.InputName(in_slot), "' must be int64 with ", c.stat_size,
                       " elements ((slide_steps + 1) * (num_thresholds + 1), or num_thresholds"
                       " + 1 when slide_steps is 0), got ",
                       DTypeName(in.dtype()), " ", ShapeToString(in.shape()));
  LoDTensor* out = ctx.Output(out_slot);
  if (out != &in) out->CopyFrom(in);
  return out->data<int64_t>();
}

// Drops the oldest batch row from the window and returns the zeroed row for this batch.
int64_t* AdvanceWindow(int64_t* stat, const AucConfig& c) {
  if (c.slide_steps == 0) return stat;
  const int64_t b = c.buckets;
  int64_t* sum = stat + c.slide_steps * b;
  for (int64_t i = 0; i < b; ++i) sum[i] -= stat[i];
  std::memmove(stat, stat + b, sizeof(int64_t) * (c.slide_steps - 1) * b);
  int64_t* batch = stat + (c.slide_steps - 1) * b;
  std::memset(batch, 0, sizeof(int64_t) * b);
  return batch;
}

AucConfig ReadAucConfig(const ExecutionContext& ctx) {
  const std::string curve = ctx.Attr<std::string>("curve", "ROC");
  FLEET_KERNEL_ENFORCE(ctx, curve == "ROC", "curve '", curve, "' is not supported; only ROC");
  const int64_t thresholds = ctx.Attr<int64_t>("num_thresholds", 4095);
  const int64_t slide = ctx.Attr<int64_t>("slide_steps", 0);
  FLEET_KERNEL_ENFORCE(ctx, thresholds >= 1 && slide >= 0, "num_thresholds (", thresholds,
                       ") must be >= 1 and slide_steps (", slide, ") >= 0");
  return {thresholds + 1, slide, (slide == 0 ? 1 : slide + 1) * (thresholds + 1)};
}

// The positive-class probability of each row (the last column of Predict), checked to lie in
// [0, 1] with a 0/1 label before anything touches the persistent stats.
struct AucBatch {
  const float* pred;
  int64_t stride;
  const int64_t* label;
  int64_t rows;
  float Prob(int64_t r) const { return pred[r * stride + stride - 1]; }
};

AucBatch ReadAucBatch(const ExecutionContext& ctx) {
  const LoDTensor& pred_t = ctx.Input("Predict");
  FLEET_KERNEL_ENFORCE(ctx, pred_t.rank() == 2 || pred_t.rank() == 1,
                       "Predict must be [batch, 2] or [batch, 1], got ",
                       ShapeToString(pred_t.shape()));
  const int64_t n = pred_t.dim(0);
  AucBatch b{FloatData(ctx, "Predict"), pred_t.rank() == 2 ? pred_t.dim(1) : 1, Labels(ctx, n), n};
  for (int64_t r = 0; r < n; ++r) {
    const float p = b.Prob(r);
    FLEET_KERNEL_ENFORCE(ctx, p >= 0.f && p <= 1.f, "predicted probability ", p, " at row ", r,
                         " is outside [0, 1]");
    FLEET_KERNEL_ENFORCE(ctx, b.label[r] == 0 || b.label[r] == 1, "label value ", b.label[r],
                         " at row ", r, " is not 0 or 1");
  }
  return b;
}

void AucKernel(const ExecutionContext& ctx) {
  const AucConfig c = ReadAucConfig(ctx);
  const AucBatch b = ReadAucBatch(ctx);
  int64_t* pos = StatOut(ctx, "StatPos", "StatPosOut", c);
  int64_t* neg = StatOut(ctx, "StatNeg", "StatNegOut", c);
  int64_t* batch_pos = AdvanceWindow(pos, c);
  int64_t* batch_neg = AdvanceWindow(neg, c);
  const int64_t thresholds = c.buckets - 1;
  for (int64_t r = 0; r < b.rows; ++r) {
    const auto bin = static_cast<int64_t>(b.Prob(r) * thresholds);
    if (b.label[r] == 1) {
      ++batch_pos[bin];
    } else {
      ++batch_neg[bin];
    }
  }
  int64_t* sum_pos = pos + c.slide_steps * c.buckets;
  int64_t* sum_neg = neg + c.slide_steps * c.buckets;
  if (c.slide_steps > 0) {
    for (int64_t i = 0; i < c.buckets; ++i) {
      sum_pos[i] += batch_pos[i];
      sum_neg[i] += batch_neg[i];
    }
  }
  *ScalarOutput<float>(ctx, "AUC") = static_cast<float>(CalcAuc(sum_pos, sum_neg, c.buckets));
}

void InferAuc(InferShapeContext* ctx) {
  ctx->SetOutput("AUC", VarInfo{{1}, DType::kFloat32});
  ctx->SetOutput("StatPosOut", ctx->Input("StatPos"));
  ctx->SetOutput("StatNegOut", ctx->Input("StatNeg"));
}

}  // namespace

void RegisterMetricOps(OpRegistry* registry) {
  OpInfo& accuracy = registry->Register("accuracy");
  accuracy.infer_shape = InferAccuracy;
  SetCpuKernel(&accuracy, AccuracyKernel);
  OpInfo& auc = registry->Register("auc");
  auc.infer_shape = InferAuc;
  SetCpuKernel(&auc, AucKernel);
}

}  // namespace fleet::operators
