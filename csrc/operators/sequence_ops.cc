// sequence_pool: one row per sequence of a LoD input, as Paddle fluid's op of the same name.
//
// X [rows, D...] is split by the last lod level; Out is [num_seqs, D...] with that level removed
// from the lod (no lod for a lod_level-1 input). pooltype is SUM, AVERAGE, SQRT (sum divided by
// sqrt(length)), MAX, FIRST or LAST. An empty sequence pools to pad_value and gets no gradient;
// MAX writes the row of each maximum (an index into X, -1 for an empty sequence) to MaxIndex.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

enum class PoolType { kSum, kAverage, kSqrt, kMax, kFirst, kLast };

PoolType ParsePoolType(const std::string& name, const std::string& op) {
  if (name == "SUM") return PoolType::kSum;
  if (name == "AVERAGE") return PoolType::kAverage;
  if (name == "SQRT") return PoolType::kSqrt;
  if (name == "MAX") return PoolType::kMax;
  if (name == "FIRST") return PoolType::kFirst;
  if (name == "LAST") return PoolType::kLast;
  throw InvalidArgument(absl::StrCat("op ", op, ": pooltype '", name,
                                     "' is unknown; expected SUM, AVERAGE, SQRT, MAX, FIRST or "
                                     "LAST"));
}

// X split into sequences: offsets of the last lod level and the width of one row.
struct SeqLayout {
  const std::vector<size_t>* offsets;
  int64_t num_seqs;
  int64_t width;
  PoolType type;
};

SeqLayout Layout(const ExecutionContext& ctx, const LoDTensor& x) {
  FLEET_KERNEL_ENFORCE(ctx, x.lod_level() >= 1 && x.rank() >= 1, "input '", ctx.InputName("X"),
                       "' needs a lod (one offset list per level) and rank >= 1; got shape ",
                       ShapeToString(x.shape()), " with lod ", LoDToString(x.lod()));
  x.ValidateLoD(absl::StrCat("input '", ctx.InputName("X"), "'"));
  int64_t width = 1;
  for (int i = 1; i < x.rank(); ++i) width *= x.dim(i);
  const auto& offsets = x.lod().back();
  return {&offsets, static_cast<int64_t>(offsets.size()) - 1, width,
          ParsePoolType(ctx.Attr<std::string>("pooltype", "AVERAGE"), ctx.op().Describe())};
}

// The factor on the sum of a sequence of `len` > 0 rows for SUM, AVERAGE and SQRT.
float SumScale(PoolType type, int64_t len) {
  if (type == PoolType::kAverage) return 1.f / static_cast<float>(len);
  if (type == PoolType::kSqrt) return 1.f / std::sqrt(static_cast<float>(len));
  return 1.f;
}

// Pools one sequence of `len` rows starting at `x` into `out`; `arg` (may be null) receives the
// X row of each maximum for MAX.
void PoolOne(PoolType type, const float* x, int64_t begin, int64_t len, int64_t width, float* out,
             int32_t* arg) {
  switch (type) {
    case PoolType::kFirst:
      std::memcpy(out, x, sizeof(float) * width);
      return;
    case PoolType::kLast:
      std::memcpy(out, x + (len - 1) * width, sizeof(float) * width);
      return;
    case PoolType::kMax:
      std::memcpy(out, x, sizeof(float) * width);
      if (arg) std::fill(arg, arg + width, static_cast<int32_t>(begin));
      for (int64_t r = 1; r < len; ++r) {
        const float* row = x + r * width;
        for (int64_t j = 0; j < width; ++j) {
          if (row[j] > out[j]) {
            out[j] = row[j];
            if (arg) arg[j] = static_cast<int32_t>(begin + r);
          }
        }
      }
      return;
    default:
      break;
  }
  std::fill(out, out + width, 0.f);
  for (int64_t r = 0; r < len; ++r) {
    const float* row = x + r * width;
    for (int64_t j = 0; j < width; ++j) out[j] += row[j];
  }
  const float scale = SumScale(type, len);
  if (scale != 1.f) {
    for (int64_t j = 0; j < width; ++j) out[j] *= scale;
  }
}

void SequencePoolKernel(const ExecutionContext& ctx) {
  const LoDTensor& x_t = ctx.Input("X");
  const SeqLayout s = Layout(ctx, x_t);
  const float* x = FloatData(ctx, "X");
  Shape shape = x_t.shape();
  shape[0] = s.num_seqs;
  LoDTensor* out_t = ctx.Output("Out");
  out_t->Resize(shape);
  LoD out_lod = x_t.lod();
  out_lod.pop_back();
  out_t->set_lod(out_lod);
  float* out = out_t->mutable_data<float>();
  int32_t* arg = nullptr;
  if (s.type == PoolType::kMax && ctx.HasOutput("MaxIndex")) {
    LoDTensor* index = ctx.Output("MaxIndex");
    index->Resize(shape);
    index->set_lod(out_lod);
    arg = index->mutable_data<int32_t>();
  }
  const float pad = ctx.Attr<float>("pad_value", 0.f);
  const auto& offsets = *s.offsets;
  for (int64_t i = 0; i < s.num_seqs; ++i) {
    const int64_t begin = offsets[i];
    const int64_t len = offsets[i + 1] - offsets[i];
    float* o = out + i * s.width;
    int32_t* a = arg ? arg + i * s.width : nullptr;
    if (len == 0) {
      std::fill(o, o + s.width, pad);
      if (a) std::fill(a, a + s.width, -1);
      continue;
    }
    PoolOne(s.type, x + begin * s.width, begin, len, s.width, o, a);
  }
}

// MaxIndex of a MAX pooling, checked to point into each sequence's own rows.
const int32_t* MaxIndexData(const ExecutionContext& ctx, const SeqLayout& s) {
  FLEET_KERNEL_ENFORCE(ctx, ctx.HasInput("MaxIndex"),
                       "pooltype MAX needs MaxIndex: bind the forward op's MaxIndex output");
  const LoDTensor& index = ctx.Input("MaxIndex");
  FLEET_KERNEL_ENFORCE(ctx, index.dtype() == DType::kInt32 && index.numel() == s.num_seqs * s.width,
                       "MaxIndex must be int32 with ", s.num_seqs * s.width, " elements, got ",
                       DTypeName(index.dtype()), " ", ShapeToString(index.shape()));
  const int32_t* arg = index.data<int32_t>();
  for (int64_t i = 0; i < s.num_seqs; ++i) {
    const int64_t begin = (*s.offsets)[i];
    const int64_t end = (*s.offsets)[i + 1];
    if (begin == end) continue;  // -1 marks an empty sequence, which gets no gradient
    for (int64_t j = 0; j < s.width; ++j) {
      const int64_t r = arg[i * s.width + j];
      FLEET_KERNEL_ENFORCE(ctx, r >= begin && r < end, "MaxIndex value ", r, " of sequence ", i,
                           " is outside its rows [", begin, ", ", end, ")");
    }
  }
  return arg;
}

// Routes each pooled gradient row back to the rows it came from; rows that did not contribute
// (other than the max, first or last row, or of an empty sequence) get zero.
void SequencePoolGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const LoDTensor& x_t = ctx.Input("X");
  const SeqLayout s = Layout(ctx, x_t);
  const LoDTensor& dout_t = ctx.Input("Out@GRAD");
  FLEET_KERNEL_ENFORCE(ctx, dout_t.numel() == s.num_seqs * s.width, "Out@GRAD has shape ",
                       ShapeToString(dout_t.shape()), " but X has ", s.num_seqs,
                       " sequences of width ", s.width);
  const float* dout = FloatData(ctx, "Out@GRAD");
  const int32_t* arg = s.type == PoolType::kMax ? MaxIndexData(ctx, s) : nullptr;
  float* dx = ResizeLike(x_t, ctx.Output("X@GRAD"));
  std::memset(dx, 0, sizeof(float) * x_t.numel());
  const int64_t w = s.width;
  for (int64_t i = 0; i < s.num_seqs; ++i) {
    const int64_t begin = (*s.offsets)[i];
    const int64_t len = (*s.offsets)[i + 1] - begin;
    const float* g = dout + i * w;
    if (len == 0) continue;
    if (s.type == PoolType::kMax) {
      for (int64_t j = 0; j < w; ++j) dx[arg[i * w + j] * w + j] = g[j];
    } else if (s.type == PoolType::kFirst || s.type == PoolType::kLast) {
      const int64_t row = s.type == PoolType::kFirst ? begin : begin + len - 1;
      std::memcpy(dx + row * w, g, sizeof(float) * w);
    } else {
      const float scale = SumScale(s.type, len);
      for (int64_t r = begin; r < begin + len; ++r) {
        for (int64_t j = 0; j < w; ++j) dx[r * w + j] = g[j] * scale;
      }
    }
  }
}

void InferSequencePool(InferShapeContext* ctx) {
  ParsePoolType(ctx->Attr<std::string>("pooltype", "AVERAGE"), ctx->op().Describe());
  VarInfo out = ctx->Input("X");
  FLEET_ENFORCE(!out.shape.empty(), InvalidArgument, "op ", ctx->op().Describe(),
                ": X must have rank >= 1");
  out.shape[0] = -1;  // the number of sequences is known at run time only
  out.lod_level = std::max(out.lod_level - 1, 0);
  ctx->SetOutput("Out", out);
  if (ctx->HasOutput("MaxIndex")) {
    out.dtype = DType::kInt32;
    ctx->SetOutput("MaxIndex", out);
  }
}

}  // namespace

void RegisterSequenceOps(OpRegistry* registry) {
  OpInfo& op = registry->Register("sequence_pool");
  op.infer_shape = InferSequencePool;
  op.grad_maker = framework::SingleGradOp({"X"}, {"MaxIndex"}, {"Out"}, {"X"});
  SetCpuKernel(&op, SequencePoolKernel);
  OpInfo& grad = registry->Register("sequence_pool_grad");
  grad.infer_shape = SameAs("X", "X@GRAD");
  SetCpuKernel(&grad, SequencePoolGradKernel);
}

}  // namespace fleet::operators
