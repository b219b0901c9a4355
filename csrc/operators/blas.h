#pragma once
// Thin wrapper over CBLAS (OpenBLAS on CPU): row-major float32 GEMM and friends. Kernels call
// these instead of writing loops so that the heavy math runs in the tuned library.

#include <cstdint>
#include <vector>

namespace fleet::operators::blas {

// C[m,n] = alpha * op(A) * op(B) + beta * C, row-major; op(X) is X or X^T per trans_x.
// lda/ldb/ldc are the packed leading dimensions.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c);
// The same with explicit leading dimensions (elements between rows of the stored matrices), for
// a block of a larger matrix.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// One call of Gemm, by its shape.
struct GemmShape {
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
};

// Seconds that one round of Gemm calls takes, a round being one call per entry of `shapes` in
// order (e.g. the forward and backward GEMMs of a training step), averaged over `rounds` rounds
// after one unmeasured round. Each entry gets its own operands and output, as the step's ops
// do, so the figure is what the GEMMs alone cost at these shapes on this BLAS and thread count:
// the bound a step made of them cannot beat. Blocking; InvalidArgument when rounds < 1 or a
// dimension is negative.
double TimeGemms(const std::vector<GemmShape>& shapes, int rounds);

// y += alpha * x over n elements.
void Axpy(int64_t n, float alpha, const float* x, float* y);

// Number of threads OpenBLAS uses; the executor keeps it at 1 per trainer thread by default so
// that Hogwild threads do not oversubscribe the cores.
void SetNumThreads(int threads);
int GetNumThreads();

}  // namespace fleet::operators::blas
