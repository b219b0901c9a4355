// Ops that create a tensor from attributes alone: fill_constant, uniform_random,
// gaussian_random and truncated_gaussian_random (and fill_constant_batch_size_like, which takes
// one dimension from an input). They initialise parameters in startup programs, so they fill memory
// in one pass with a cheap generator: one 64-bit Mersenne Twister draw gives two float32 values.

#include <cmath>
#include <random>

#include "absl/strings/numbers.h"
#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

Shape ShapeAttr(const OpSpec& op) { return op.attrs.Get<std::vector<int64_t>>("shape", op.type); }

DType DTypeAttr(const OpSpec& op) {
  return DTypeFromInt(op.attrs.GetOr<int32_t>("dtype", static_cast<int>(DType::kFloat32), op.type),
                      absl::StrCat("op ", op.Describe(), ": attribute dtype"));
}

void InferFromAttrs(InferShapeContext* ctx) {
  VarInfo info;
  info.shape = ShapeAttr(ctx->op());
  info.dtype = DTypeAttr(ctx->op());
  ctx->SetOutput("Out", info);
}

// Sizes Out from the attributes, failing with the op named on a negative dimension.
void* ResizeFromAttrs(const ExecutionContext& ctx, DType dtype) {
  Shape shape = ShapeAttr(ctx.op());
  for (int64_t d : shape) {
    FLEET_KERNEL_ENFORCE(ctx, d >= 0, "shape ", ShapeToString(shape),
                         " needs non-negative dimensions at run time");
  }
  LoDTensor* out = ctx.Output("Out");
  out->Resize(std::move(shape));
  out->set_lod({});
  return out->mutable_data(dtype);
}

// ---- fill_constant --------------------------------------------------------------------------

// `value` is a float attribute; `str_value`, when set, carries values a float cannot hold
// exactly (large int64), as in Paddle.
void FillConstantKernel(const ExecutionContext& ctx) {
  const DType dtype = DTypeAttr(ctx.op());
  const std::string str_value = ctx.Attr<std::string>("str_value", "");
  double value = ctx.Attr<float>("value", 0.f);
  int64_t int_value = static_cast<int64_t>(value);
  if (!str_value.empty()) {
    FLEET_KERNEL_ENFORCE(ctx, absl::SimpleAtod(str_value, &value), "str_value '", str_value,
                         "' is not a number");
    if (!absl::SimpleAtoi(str_value, &int_value)) int_value = static_cast<int64_t>(value);
  }
  void* data = ResizeFromAttrs(ctx, dtype);
  const int64_t n = ctx.Output("Out")->numel();
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    T v;
    if constexpr (std::is_same_v<T, bool>) {
      v = value != 0;
    } else if constexpr (std::is_integral_v<T>) {
      v = static_cast<T>(int_value);
    } else {
      v = static_cast<T>(value);
    }
    std::fill(static_cast<T*>(data), static_cast<T*>(data) + n, v);
  });
}

// ---- uniform_random / gaussian_random --------------------------------------------------------

// seed 0 draws the generator's seed from the run's generator (different every run); any other
// seed gives the same values every time.
std::mt19937_64 MakeEngine(const ExecutionContext& ctx) {
  const int64_t seed = ctx.Attr<int64_t>("seed", 0);
  return std::mt19937_64(seed != 0 ? static_cast<uint64_t>(seed) : ctx.rng()());
}

DType RandomDType(const ExecutionContext& ctx) {
  const DType dtype = DTypeAttr(ctx.op());
  FLEET_KERNEL_ENFORCE(ctx, dtype == DType::kFloat32 || dtype == DType::kFloat64, "dtype ",
                       DTypeName(dtype), " is not supported: use float32 or float64");
  return dtype;
}

constexpr double kTwoPi = 6.283185307179586;

// Uniform in [0, 1) from the top 24 (float) or 53 (double) bits of a draw.
inline float UnitFloat(uint64_t bits) { return static_cast<float>(bits >> 40) * 0x1p-24f; }
inline double UnitDouble(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1p-53; }

void UniformRandomKernel(const ExecutionContext& ctx) {
  const DType dtype = RandomDType(ctx);
  const float lo = ctx.Attr<float>("min", -1.f);
  const float hi = ctx.Attr<float>("max", 1.f);
  FLEET_KERNEL_ENFORCE(ctx, lo <= hi, "min (", lo, ") must not exceed max (", hi, ")");
  std::mt19937_64 engine = MakeEngine(ctx);
  void* data = ResizeFromAttrs(ctx, dtype);
  const int64_t n = ctx.Output("Out")->numel();
  if (dtype == DType::kFloat32) {
    float* out = static_cast<float*>(data);
    const float span = hi - lo;
    int64_t i = 0;
    for (; i + 1 < n; i += 2) {
      const uint64_t bits = engine();
      out[i] = lo + span * UnitFloat(bits);
      out[i + 1] = lo + span * UnitFloat(bits << 24);
    }
    if (i < n) out[i] = lo + span * UnitFloat(engine());
  } else {
    double* out = static_cast<double*>(data);
    for (int64_t i = 0; i < n; ++i) out[i] = lo + (double{hi} - lo) * UnitDouble(engine());
  }
}

// Box-Muller: two independent normals from two uniforms in (0, 1].
template <typename T>
void FillGaussian(std::mt19937_64* engine, T mean, T std, T* out, int64_t n) {
  auto unit = [](uint64_t bits) { return static_cast<T>((bits >> 11) + 1) * T(0x1p-53); };
  for (int64_t i = 0; i < n; i += 2) {
    T u1, u2;
    if constexpr (std::is_same_v<T, float>) {
      const uint64_t bits = (*engine)();
      u1 = static_cast<float>((bits >> 40) + 1) * 0x1p-24f;
      u2 = static_cast<float>((bits >> 16) & 0xFFFFFF) * 0x1p-24f;
    } else {
      u1 = unit((*engine)());
      u2 = unit((*engine)());
    }
    const T r = std::sqrt(T(-2) * std::log(u1));
    const T angle = static_cast<T>(kTwoPi) * u2;
    out[i] = mean + std * r * std::cos(angle);
    if (i + 1 < n) out[i + 1] = mean + std * r * std::sin(angle);
  }
}

void GaussianRandomKernel(const ExecutionContext& ctx) {
  const DType dtype = RandomDType(ctx);
  const float mean = ctx.Attr<float>("mean", 0.f);
  const float std = ctx.Attr<float>("std", 1.f);
  FLEET_KERNEL_ENFORCE(ctx, std >= 0, "std (", std, ") must not be negative");
  std::mt19937_64 engine = MakeEngine(ctx);
  void* data = ResizeFromAttrs(ctx, dtype);
  const int64_t n = ctx.Output("Out")->numel();
  if (dtype == DType::kFloat32) {
    FillGaussian<float>(&engine, mean, std, static_cast<float*>(data), n);
  } else {
    FillGaussian<double>(&engine, mean, std, static_cast<double*>(data), n);
  }
}

// truncated_gaussian_random: normal values, those beyond two standard deviations drawn again
// (the distribution of Paddle's op, which maps uniforms through the truncated inverse CDF).
void TruncatedGaussianRandomKernel(const ExecutionContext& ctx) {
  const DType dtype = RandomDType(ctx);
  const float mean = ctx.Attr<float>("mean", 0.f);
  const float std = ctx.Attr<float>("std", 1.f);
  FLEET_KERNEL_ENFORCE(ctx, std >= 0, "std (", std, ") must not be negative");
  std::mt19937_64 engine = MakeEngine(ctx);
  void* data = ResizeFromAttrs(ctx, dtype);
  const int64_t n = ctx.Output("Out")->numel();
  double pair[2];
  for (int64_t i = 0; i < n; ++i) {
    double z;
    do {
      FillGaussian<double>(&engine, 0.0, 1.0, pair, 1);
      z = pair[0];
    } while (std::abs(z) > 2.0);
    const double v = mean + std * z;
    if (dtype == DType::kFloat32) {
      static_cast<float*>(data)[i] = static_cast<float>(v);
    } else {
      static_cast<double*>(data)[i] = v;
    }
  }
}

// ---- fill_constant_batch_size_like -----------------------------------------------------------

// Out has `shape` with dimension output_dim_idx replaced by Input's dimension input_dim_idx (a
// batch-sized constant, e.g. an initial state), filled with `value`.
Shape BatchSizeLikeShape(const OpSpec& op, const Shape& input, std::string* why) {
  Shape shape = ShapeAttr(op);
  const int64_t in_idx = op.attrs.GetOr<int32_t>("input_dim_idx", 0, op.type);
  const int64_t out_idx = op.attrs.GetOr<int32_t>("output_dim_idx", 0, op.type);
  if (in_idx < 0 || in_idx >= static_cast<int64_t>(input.size()) || out_idx < 0 ||
      out_idx >= static_cast<int64_t>(shape.size())) {
    *why =
        absl::StrCat("input_dim_idx ", in_idx, " must index Input of shape ", ShapeToString(input),
                     " and output_dim_idx ", out_idx, " the shape ", ShapeToString(shape));
    return {};
  }
  shape[out_idx] = input[in_idx];
  return shape;
}

void InferBatchSizeLike(InferShapeContext* ctx) {
  std::string why;
  VarInfo info;
  info.shape = BatchSizeLikeShape(ctx->op(), ctx->Input("Input").shape, &why);
  FLEET_ENFORCE(why.empty(), InvalidArgument, "op ", ctx->op().Describe(), ": ", why);
  info.dtype = DTypeAttr(ctx->op());
  ctx->SetOutput("Out", info);
}

void FillConstantBatchSizeLikeKernel(const ExecutionContext& ctx) {
  std::string why;
  Shape shape = BatchSizeLikeShape(ctx.op(), ctx.Input("Input").shape(), &why);
  if (!why.empty()) ctx.Fail(why);
  for (int64_t d : shape) {
    FLEET_KERNEL_ENFORCE(ctx, d >= 0, "shape ", ShapeToString(shape),
                         " may hold -1 only at output_dim_idx");
  }
  const DType dtype = DTypeAttr(ctx.op());
  const double value = ctx.Attr<float>("value", 0.f);
  LoDTensor* out = ctx.Output("Out");
  out->Resize(std::move(shape));
  out->set_lod({});
  void* data = out->mutable_data(dtype);
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    std::fill(static_cast<T*>(data), static_cast<T*>(data) + out->numel(), static_cast<T>(value));
  });
}

void RegisterFill(OpRegistry* registry, const std::string& type, framework::KernelFn kernel) {
  OpInfo& op = registry->Register(type);
  op.infer_shape = InferFromAttrs;
  SetCpuKernel(&op, std::move(kernel));
}

}  // namespace

void RegisterFillOps(OpRegistry* registry) {
  RegisterFill(registry, "fill_constant", FillConstantKernel);
  RegisterFill(registry, "uniform_random", UniformRandomKernel);
  RegisterFill(registry, "gaussian_random", GaussianRandomKernel);
  RegisterFill(registry, "truncated_gaussian_random", TruncatedGaussianRandomKernel);
  OpInfo& batch_like = registry->Register("fill_constant_batch_size_like");
  batch_like.infer_shape = InferBatchSizeLike;
  SetCpuKernel(&batch_like, FillConstantBatchSizeLikeKernel);
}

}  // namespace fleet::operators
