// CUDA kernels of mul (the GEMM of fc) and matmul (2-D and batched of equal batch shape, with
// transposes and alpha), with gradients, through cuBLAS in float32 (no TF32: the same
// arithmetic as the CPU kernels and as PyTorch's default for float32 matmul). cuBLAS is
// column-major; a row-major C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T.

#include <cublas_v2.h>

#include "operators/cuda/glue.h"

namespace fleet::operators::cuda {
namespace {

cublasHandle_t Blas(const ExecutionContext& ctx) {
  return static_cast<cublasHandle_t>(ctx.cuda().blas());
}

void CheckBlas(cublasStatus_t status, const char* what) {
  FLEET_ENFORCE(status == CUBLAS_STATUS_SUCCESS, Internal, what,
                " failed: ", cublasGetStatusString(status));
}

// Row-major C[m, n] = alpha * op(A) op(B) + beta * C, op(A) [m, k], op(B) [k, n], `batch`
// products at strides m*k, k*n and m*n.
void Gemm(const ExecutionContext& ctx, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, const float* b, float beta, float* c, int64_t batch = 1) {
  if (m == 0 || n == 0) return;
  const int lda = static_cast<int>(trans_a ? m : k);
  const int ldb = static_cast<int>(trans_b ? k : n);
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1) {
    CheckBlas(
        cublasSgemm(Blas(ctx), op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                    static_cast<int>(k), &alpha, b, ldb, a, lda, &beta, c, static_cast<int>(n)),
        "cublasSgemm");
    return;
  }
  CheckBlas(
      cublasSgemmStridedBatched(Blas(ctx), op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                static_cast<int>(k), &alpha, b, ldb, k * n, a, lda, m * k, &beta, c,
                                static_cast<int>(n), m * n, static_cast<int>(batch)),
      "cublasSgemmStridedBatched");
}

int64_t Product(const Shape& shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= shape[i];
  return p;
}

struct MulDims {
  int64_t m = 0, k = 0, n = 0;
  Shape out;
};

MulDims PlanMul(const ExecutionContext& ctx, const Shape& x, const Shape& y) {
  const int xnc = ctx.Attr<int32_t>("x_num_col_dims", 1);
  const int ync = ctx.Attr<int32_t>("y_num_col_dims", 1);
  FLEET_KERNEL_ENFORCE(ctx, xnc >= 1 && xnc < static_cast<int>(x.size()), "x_num_col_dims=", xnc,
                       " must be in [1, rank of X) for X of shape ", ShapeToString(x));
  FLEET_KERNEL_ENFORCE(ctx, ync >= 1 && ync < static_cast<int>(y.size()), "y_num_col_dims=", ync,
                       " must be in [1, rank of Y) for Y of shape ", ShapeToString(y));
  MulDims d;
  d.m = Product(x, 0, xnc);
  d.k = Product(x, xnc, x.size());
  d.n = Product(y, ync, y.size());
  FLEET_KERNEL_ENFORCE(ctx, Product(y, 0, ync) == d.k, "X's shape ", ShapeToString(x),
                       " flattened at x_num_col_dims=", xnc, " has width ", d.k, " but Y's shape ",
                       ShapeToString(y), " flattened at y_num_col_dims=", ync, " has height ",
                       Product(y, 0, ync));
  d.out.assign(x.begin(), x.begin() + xnc);
  d.out.insert(d.out.end(), y.begin() + ync, y.end());
  return d;
}

void MulKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const LoDTensor& y = ctx.Input("Y");
  const MulDims d = PlanMul(ctx, x.shape(), y.shape());
  const float* xs = FloatData(ctx, "X");
  const float* ys = FloatData(ctx, "Y");
  LoD lod = x.lod();
  LoDTensor* out = ctx.Output("Out");
  float* os = DeviceOutput<float>(ctx, out, d.out);
  out->set_lod(std::move(lod));
  Gemm(ctx, false, false, d.m, d.n, d.k, 1.f, xs, ys, 0.f, os);
}

void MulGradKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const LoDTensor& y = ctx.Input("Y");
  const MulDims d = PlanMul(ctx, x.shape(), y.shape());
  FLEET_KERNEL_ENFORCE(ctx, ctx.Input("Out@GRAD").numel() == d.m * d.n, "Out@GRAD has shape ",
                       ShapeToString(ctx.Input("Out@GRAD").shape()), ", expected ", d.m, "x", d.n,
                       " elements");
  const float* dout = FloatData(ctx, "Out@GRAD");
  if (ctx.HasOutput("X@GRAD")) {
    float* dx = DeviceOutputLike(ctx, x, ctx.Output("X@GRAD"));
    Gemm(ctx, false, true, d.m, d.k, d.n, 1.f, dout, FloatData(ctx, "Y"), 0.f, dx);  // dOut Y^T
  }
  if (ctx.HasOutput("Y@GRAD")) {
    float* dy = DeviceOutputLike(ctx, y, ctx.Output("Y@GRAD"));
    Gemm(ctx, true, false, d.k, d.n, d.m, 1.f, FloatData(ctx, "X"), dout, 0.f, dy);  // X^T dOut
  }
}

// matmul: X [..., a, b] and Y [..., c, d] with equal leading (batch) dimensions, or Y 2-D.
struct MatmulDims {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  bool trans_x = false, trans_y = false, y_shared = false;
  Shape out;
};

MatmulDims PlanMatmul(const ExecutionContext& ctx, const Shape& x, const Shape& y) {
  MatmulDims d;
  d.trans_x = ctx.Attr<bool>("transpose_X", false);
  d.trans_y = ctx.Attr<bool>("transpose_Y", false);
  const size_t rx = x.size(), ry = y.size();
  FLEET_KERNEL_ENFORCE(ctx, rx >= 2 && ry >= 2 && (ry == 2 || ry == rx), "X ", ShapeToString(x),
                       " and Y ", ShapeToString(y),
                       ": matmul on CUDA needs matrices with equal batch dimensions, or a 2-D Y");
  d.y_shared = ry == 2 && rx > 2;
  for (size_t i = 0; i + 2 < rx; ++i) {
    FLEET_KERNEL_ENFORCE(ctx, d.y_shared || x[i] == y[i], "batch dimension ", i, " of X ",
                         ShapeToString(x), " differs from Y's ", ShapeToString(y));
    d.batch *= x[i];
  }
  d.m = d.trans_x ? x[rx - 1] : x[rx - 2];
  d.k = d.trans_x ? x[rx - 2] : x[rx - 1];
  const int64_t ky = d.trans_y ? y[ry - 1] : y[ry - 2];
  d.n = d.trans_y ? y[ry - 2] : y[ry - 1];
  FLEET_KERNEL_ENFORCE(ctx, ky == d.k, "X ", ShapeToString(x), " and Y ", ShapeToString(y),
                       " (transpose_X=", d.trans_x, ", transpose_Y=", d.trans_y,
                       ") have inner sizes ", d.k, " and ", ky);
  FLEET_KERNEL_ENFORCE(ctx, !d.y_shared || !d.trans_x,
                       "matmul on CUDA with a 2-D Y needs transpose_X=false");
  d.out.assign(x.begin(), x.end() - 2);
  d.out.push_back(d.m);
  d.out.push_back(d.n);
  return d;
}

void MatmulKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const LoDTensor& y = ctx.Input("Y");
  const MatmulDims d = PlanMatmul(ctx, x.shape(), y.shape());
  const float alpha = ctx.Attr<float>("alpha", 1.f);
  float* out = DeviceOutput<float>(ctx, ctx.Output("Out"), d.out);
  if (d.y_shared) {  // [batch * m, k] times one [k, n]
    Gemm(ctx, false, d.trans_y, d.batch * d.m, d.n, d.k, alpha, FloatData(ctx, "X"),
         FloatData(ctx, "Y"), 0.f, out);
  } else {
    Gemm(ctx, d.trans_x, d.trans_y, d.m, d.n, d.k, alpha, FloatData(ctx, "X"), FloatData(ctx, "Y"),
         0.f, out, d.batch);
  }
}

void MatmulGradKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const LoDTensor& y = ctx.Input("Y");
  const MatmulDims d = PlanMatmul(ctx, x.shape(), y.shape());
  const float alpha = ctx.Attr<float>("alpha", 1.f);
  FLEET_KERNEL_ENFORCE(ctx, ctx.Input("Out@GRAD").numel() == d.batch * d.m * d.n,
                       "Out@GRAD has shape ", ShapeToString(ctx.Input("Out@GRAD").shape()),
                       ", expected ", ShapeToString(d.out));
  const float* g = FloatData(ctx, "Out@GRAD");
  const float* xs = FloatData(ctx, "X");
  const float* ys = FloatData(ctx, "Y");
  if (d.y_shared) {
    const int64_t rows = d.batch * d.m;
    if (ctx.HasOutput("X@GRAD")) {  // dX [rows, k] = dOut op(Y)^T
      Gemm(ctx, false, !d.trans_y, rows, d.k, d.n, alpha, g, ys, 0.f,
           DeviceOutputLike(ctx, x, ctx.Output("X@GRAD")));
    }
    if (ctx.HasOutput("Y@GRAD")) {
      float* dy = DeviceOutputLike(ctx, y, ctx.Output("Y@GRAD"));
      if (d.trans_y) {  // dY [n, k] = dOut^T X
        Gemm(ctx, true, false, d.n, d.k, rows, alpha, g, xs, 0.f, dy);
      } else {  // dY [k, n] = X^T dOut
        Gemm(ctx, true, false, d.k, d.n, rows, alpha, xs, g, 0.f, dy);
      }
    }
    return;
  }
  const int64_t b = d.batch;
  if (ctx.HasOutput("X@GRAD")) {
    float* dx = DeviceOutputLike(ctx, x, ctx.Output("X@GRAD"));
    if (!d.trans_x) {  // dX [m, k] = dOut op(Y)^T
      Gemm(ctx, false, !d.trans_y, d.m, d.k, d.n, alpha, g, ys, 0.f, dx, b);
    } else {  // dX [k, m] = op(Y) dOut^T
      Gemm(ctx, d.trans_y, true, d.k, d.m, d.n, alpha, ys, g, 0.f, dx, b);
    }
  }
  if (ctx.HasOutput("Y@GRAD")) {
    float* dy = DeviceOutputLike(ctx, y, ctx.Output("Y@GRAD"));
    if (!d.trans_y) {  // dY [k, n] = op(X)^T dOut
      Gemm(ctx, !d.trans_x, false, d.k, d.n, d.m, alpha, xs, g, 0.f, dy, b);
    } else {  // dY [n, k] = dOut^T op(X)
      Gemm(ctx, true, d.trans_x, d.n, d.k, d.m, alpha, g, xs, 0.f, dy, b);
    }
  }
}

}  // namespace

void RegisterCudaMatmulKernels(OpRegistry* registry) {
  SetCudaKernel(registry, "mul", MulKernel);
  SetCudaKernel(registry, "mul_grad", MulGradKernel);
  SetCudaKernel(registry, "matmul", MatmulKernel);
  SetCudaKernel(registry, "matmul_grad", MatmulGradKernel);
}

}  // namespace fleet::operators::cuda
