#pragma once
// Thin wrapper over CBLAS (OpenBLAS on CPU): row-major float32 GEMM and friends. Kernels call
// these instead of writing loops so that the heavy math runs in the tuned library.

#include <cstdint>

namespace fleet::operators::blas {

// C[m,n] = alpha * op(A) * op(B) + beta * C, row-major; op(X) is X or X^T per trans_x.
// lda/ldb/ldc default to the packed leading dimensions.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c);

// y += alpha * x over n elements.
void Axpy(int64_t n, float alpha, const float* x, float* y);

// Number of threads OpenBLAS uses; the executor keeps it at 1 per trainer thread by default so
// that Hogwild threads do not oversubscribe the cores.
void SetNumThreads(int threads);
int GetNumThreads();

}  // namespace fleet::operators::blas
