#pragma once
// The per-element update rules of the optimizer ops, shared by the CPU kernels
// (optimizer_ops.cc) and the CUDA kernels (optimizer_ops.cu) so both compute the same formula.
// Each rule follows the PaddlePaddle fluid kernel of the same name (paddle/fluid/operators/
// optimizers/*_op.h). The functions are branch-free so the CPU loops over them vectorise.

#include <cmath>

#if defined(__CUDACC__)
#define FLEET_HOST_DEVICE __host__ __device__
#else
#define FLEET_HOST_DEVICE
#endif

namespace fleet::operators {

// sgd: p -= lr * g.
FLEET_HOST_DEVICE inline void SgdElement(float lr, float g, float* p) { *p -= lr * g; }

// momentum: v = mu * v + g; p -= lr * v.
FLEET_HOST_DEVICE inline void MomentumElement(float lr, float mu, float g, float* p, float* v) {
  *v = mu * *v + g;
  *p -= lr * *v;
}

// momentum with use_nesterov: v = mu * v + g; p -= lr * (g + mu * v).
FLEET_HOST_DEVICE inline void NesterovElement(float lr, float mu, float g, float* p, float* v) {
  *v = mu * *v + g;
  *p -= lr * (g + mu * *v);
}

// adagrad: m += g^2; p -= lr * g / (sqrt(m) + epsilon).
FLEET_HOST_DEVICE inline void AdagradElement(float lr, float epsilon, float g, float* p, float* m) {
  *m += g * g;
  *p -= lr * g / (sqrtf(*m) + epsilon);
}

// The scalars of one Adam step, computed once per step from the learning rate and the beta
// powers *before* this step's update of them (Kingma & Ba, "Adam", ICLR 2015, section 2, with
// epsilon scaled as Paddle does so that eps_hat = epsilon * sqrt(1 - beta2^t)).
struct AdamStep {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float lr_t = 0.f;     // lr * sqrt(1 - beta2_pow) / (1 - beta1_pow)
  float eps_hat = 0.f;  // epsilon * sqrt(1 - beta2_pow)
};

inline AdamStep MakeAdamStep(float lr, float beta1, float beta2, float epsilon, float beta1_pow,
                             float beta2_pow) {
  const double bias2 = std::sqrt(1.0 - static_cast<double>(beta2_pow));
  AdamStep step;
  step.beta1 = beta1;
  step.beta2 = beta2;
  step.lr_t = static_cast<float>(lr * bias2 / (1.0 - static_cast<double>(beta1_pow)));
  step.eps_hat = static_cast<float>(epsilon * bias2);
  return step;
}

// adam: m1 = b1 * m1 + (1 - b1) * g; m2 = b2 * m2 + (1 - b2) * g^2;
//       p -= lr_t * m1 / (sqrt(m2) + eps_hat).
FLEET_HOST_DEVICE inline void AdamElement(const AdamStep& s, float g, float* p, float* m1,
                                          float* m2) {
  *m1 = s.beta1 * *m1 + (1.f - s.beta1) * g;
  *m2 = s.beta2 * *m2 + (1.f - s.beta2) * g * g;
  *p -= s.lr_t * *m1 / (sqrtf(*m2) + s.eps_hat);
}

// decayed_adagrad: m = decay * m + (1 - decay) * g^2; p -= lr * g / (sqrt(m) + epsilon).
FLEET_HOST_DEVICE inline void DecayedAdagradElement(float lr, float decay, float epsilon, float g,
                                                    float* p, float* m) {
  *m = decay * *m + (1.f - decay) * g * g;
  *p -= lr * g / (sqrtf(*m) + epsilon);
}

// rmsprop (Hinton, Coursera lecture 6e; centered: Graves, arXiv:1308.0850, eq. 38-45):
//   ms = rho * ms + (1 - rho) * g^2
//   centered: mg = rho * mg + (1 - rho) * g; mom = mu * mom + lr * g / sqrt(ms - mg^2 + eps)
//   else:                                    mom = mu * mom + lr * g / sqrt(ms + eps)
//   p -= mom
FLEET_HOST_DEVICE inline void RmspropElement(float lr, float rho, float mu, float epsilon, float g,
                                             float* p, float* ms, float* mom) {
  *ms = rho * *ms + (1.f - rho) * g * g;
  *mom = mu * *mom + lr * g / sqrtf(*ms + epsilon);
  *p -= *mom;
}

FLEET_HOST_DEVICE inline void CenteredRmspropElement(float lr, float rho, float mu, float epsilon,
                                                     float g, float* p, float* ms, float* mg,
                                                     float* mom) {
  *ms = rho * *ms + (1.f - rho) * g * g;
  *mg = rho * *mg + (1.f - rho) * g;
  *mom = mu * *mom + lr * g / sqrtf(*ms - *mg * *mg + epsilon);
  *p -= *mom;
}

// adamax (Kingma & Ba, "Adam", section 7.1): m = b1 * m + (1 - b1) * g;
// u = max(b2 * u + epsilon, |g|); p -= lr / (1 - beta1_pow) * m / u.
FLEET_HOST_DEVICE inline void AdamaxElement(float lr_t, float beta1, float beta2, float epsilon,
                                            float g, float* p, float* m, float* u) {
  *m = beta1 * *m + (1.f - beta1) * g;
  *u = fmaxf(beta2 * *u + epsilon, fabsf(g));
  *p -= lr_t * *m / *u;
}

// ftrl (McMahan et al., "Ad click prediction: a view from the trenches", KDD 2013, algorithm 1,
// with Paddle's learning-rate power): n' = n + g^2;
//   z += g - (n'^-lr_power - n^-lr_power) / lr * p
//   p = |z| > l1 ? (l1 * sign(z) - z) / (n'^-lr_power / lr + 2 * l2) : 0;  n = n'.
// lr_power = -0.5 (the paper's rule) takes square roots.
FLEET_HOST_DEVICE inline void FtrlElement(float lr, float l1, float l2, float lr_power, float g,
                                          float* p, float* n, float* z) {
  const float n_new = *n + g * g;
  const bool root = lr_power == -0.5f;
  const float sigma_new = root ? sqrtf(n_new) : powf(n_new, -lr_power);
  const float sigma_old = root ? sqrtf(*n) : powf(*n, -lr_power);
  *z += g - (sigma_new - sigma_old) / lr * *p;
  const float sign = (*z > 0.f) - (*z < 0.f);
  *p = fabsf(*z) > l1 ? (l1 * sign - *z) / (sigma_new / lr + 2.f * l2) : 0.f;
  *n = n_new;
}

}  // namespace fleet::operators
