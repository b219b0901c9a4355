#include "operators/blas.h"

#include <cblas.h>

namespace fleet::operators::blas {

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  const int64_t lda = trans_a ? m : k;
  const int64_t ldb = trans_b ? k : n;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(n));
}

void Axpy(int64_t n, float alpha, const float* x, float* y) {
  cblas_saxpy(static_cast<int>(n), alpha, x, 1, y, 1);
}

void SetNumThreads(int threads) { openblas_set_num_threads(threads); }

int GetNumThreads() { return openblas_get_num_threads(); }

}  // namespace fleet::operators::blas
