#include "operators/blas.h"

#include <cblas.h>

#include <chrono>

#include "core/errors.h"

namespace fleet::operators::blas {

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  Gemm(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

double TimeGemms(const std::vector<GemmShape>& shapes, int rounds) {
  FLEET_ENFORCE(rounds >= 1, InvalidArgument, "TimeGemms needs rounds >= 1, got ", rounds);
  struct Operands {
    std::vector<float> a, b, c;
  };
  std::vector<Operands> operands(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    const GemmShape& s = shapes[i];
    FLEET_ENFORCE(s.m >= 0 && s.n >= 0 && s.k >= 0, InvalidArgument, "GEMM shape ", i,
                  " has a negative dimension: m=", s.m, " n=", s.n, " k=", s.k);
    // Small nonzero values: zeros or denormals could take another path through the kernel.
    operands[i].a.assign(s.m * s.k, 0.01f);
    operands[i].b.assign(s.k * s.n, 0.02f);
    operands[i].c.assign(s.m * s.n, 0.f);
  }
  auto round = [&] {
    for (size_t i = 0; i < shapes.size(); ++i) {
      const GemmShape& s = shapes[i];
      Gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.f, operands[i].a.data(), operands[i].b.data(),
           0.f, operands[i].c.data());
    }
  };
  round();
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r) round();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / rounds;
}

void Axpy(int64_t n, float alpha, const float* x, float* y) {
  cblas_saxpy(static_cast<int>(n), alpha, x, 1, y, 1);
}

void SetNumThreads(int threads) { openblas_set_num_threads(threads); }

int GetNumThreads() { return openblas_get_num_threads(); }

}  // namespace fleet::operators::blas
