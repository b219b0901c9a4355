#pragma once
// Launchers of Fleet's CUDA kernels, with plain pointers to device memory: the op glue
// (cuda/*_ops.cc, host code) calls them without CUDA headers. Every launcher queues its kernel
// on `stream` (a cudaStream_t, the device's one compute stream), returns without waiting, and
// throws the fleet error of a failed launch. Sizes are element counts. Defined in the .cu files
// of this folder; each file's comment says which formulas it follows.

#include <cstdint>

namespace fleet::operators::cuda {

using Stream = void*;

// ---- elementwise.cu -----------------------------------------------------------------------
// out[i] = bit pattern `value` (4 or 8 bytes per element).
void Fill32(void* out, int64_t n, uint32_t value, Stream stream);
void Fill64(void* out, int64_t n, uint64_t value, Stream stream);
// out = scale * x + bias (bias_after_scale) or scale * (x + bias).
void Scale(const float* x, float* out, int64_t n, float scale, float bias, bool bias_after_scale,
           Stream stream);
enum class Activation { kRelu, kSigmoid, kTanh };
void ActivationForward(Activation act, const float* x, float* out, int64_t n, Stream stream);
// dx from the forward output (all three rules need only Out) and dout.
void ActivationBackward(Activation act, const float* out, const float* dout, float* dx, int64_t n,
                        Stream stream);
// out[p, j, q] = x[p, j, q] + y[j] over X viewed as [pre, n, post] (y has n elements); y with
// pre * n * post elements is the equal-shape case (pass pre = post = 1).
void AddBroadcast(const float* x, const float* y, float* out, int64_t pre, int64_t n, int64_t post,
                  Stream stream);
// out[i] += x[i].
void AddInPlace(const float* x, float* out, int64_t n, Stream stream);
// dy[j] = sum over p, q of dout[p, j, q] (the gradient of a broadcast Y).
void SumToBroadcast(const float* dout, float* dy, int64_t pre, int64_t n, int64_t post,
                    Stream stream);
// out = mean of x's n elements (one element).
void Mean(const float* x, float* out, int64_t n, Stream stream);
// dx[i] = dout[0] / n.
void MeanGrad(const float* dout, float* dx, int64_t n, Stream stream);
// Casts between float32, float64, int32 and int64 (dtype codes of core/dtype.h).
void Cast(const void* x, int from_dtype, void* out, int to_dtype, int64_t n, Stream stream);
// sigmoid_cross_entropy_with_logits: loss = max(x, 0) - x * label + log(1 + exp(-|x|)), 0 where
// label == ignore_index; with `count` (one device float of scratch, for the attribute
// normalize) divided by the count of kept labels, else null.
void SigmoidCrossEntropy(const float* x, const float* label, float* loss, int64_t n,
                         float ignore_index, float* count, Stream stream);
void SigmoidCrossEntropyGrad(const float* x, const float* label, const float* dloss, float* dx,
                             int64_t n, float ignore_index, float* count, Stream stream);

// ---- softmax.cu ---------------------------------------------------------------------------
// Row-wise softmax over [rows, width].
void Softmax(const float* x, float* out, int64_t rows, int64_t width, Stream stream);
// dx = out * (dout - sum(dout * out)) per row.
void SoftmaxGrad(const float* out, const float* dout, float* dx, int64_t rows, int64_t width,
                 Stream stream);
// softmax_with_cross_entropy with hard int64 labels [rows]: softmax [rows, width] and
// loss [rows] = -log softmax[label] (0 where label == ignore_index).
void SoftmaxCrossEntropyHard(const float* logits, const int64_t* label, float* softmax, float* loss,
                             int64_t rows, int64_t width, int64_t ignore_index, Stream stream);
// dlogits = (softmax - onehot(label)) * dloss[row] (0 rows where label == ignore_index).
void SoftmaxCrossEntropyHardGrad(const float* softmax, const int64_t* label, const float* dloss,
                                 float* dlogits, int64_t rows, int64_t width, int64_t ignore_index,
                                 Stream stream);

// ---- sparse.cu ----------------------------------------------------------------------------
// out[i, :] = w[ids[i], :], zeros where ids[i] == padding_idx.
void EmbeddingLookup(const float* w, const int64_t* ids, float* out, int64_t num_ids, int64_t width,
                     int64_t padding_idx, Stream stream);
// rows[i] = ids[i], or -1 where ids[i] == padding_idx (a row every consumer skips).
void SparseGradRows(const int64_t* ids, int64_t* rows, int64_t n, int64_t padding_idx,
                    Stream stream);
// Dense W@GRAD: dw (zeroed by the caller) [rows of w, width] += dout rows at ids.
void EmbeddingDenseGrad(const int64_t* ids, const float* dout, float* dw, int64_t num_ids,
                        int64_t width, int64_t padding_idx, Stream stream);
// sequence_pool over offsets [num_seq + 1] (device memory): out[s, :] = scale_s * sum of rows
// [offsets[s], offsets[s + 1]) of x [*, width]; scale_s is 1 (SUM), 1/len (AVERAGE) or
// 1/sqrt(len) (SQRT).
enum class Pool { kSum, kAverage, kSqrt };
void SequencePool(Pool pool, const float* x, const int64_t* offsets, float* out, int64_t num_seq,
                  int64_t width, Stream stream);
void SequencePoolGrad(Pool pool, const float* dout, const int64_t* offsets, float* dx,
                      int64_t num_seq, int64_t width, Stream stream);
// param[rows[i], :] -= lr[0] * value[i, :] (rows < 0 skipped; duplicates add up).
void SparseSgd(const float* lr, const int64_t* rows, const float* value, float* param,
               int64_t num_rows, int64_t width, Stream stream);

// ---- optimizer_ops.cu (dense and lazy sparse updates on device tensors) ---------------------
// The learning rate and beta powers are read from device memory, so no step waits for the host.
void SgdDense(const float* lr, const float* grad, float* param, int64_t n, Stream stream);
void MomentumDense(const float* lr, float mu, bool nesterov, const float* grad, float* param,
                   float* velocity, int64_t n, Stream stream);
struct AdamConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
};
// One adam step on n elements, then beta1_pow_out = beta1_pow * beta1 (likewise beta2); the
// pow outputs may alias the inputs, or be null (older programs advance the powers with scale
// ops).
void AdamDense(const AdamConfig& config, const float* lr, const float* beta1_pow,
               const float* beta2_pow, const float* grad, float* param, float* moment1,
               float* moment2, float* beta1_pow_out, float* beta2_pow_out, int64_t n,
               Stream stream);
// Lazy adam over the rows of a SelectedRows gradient (duplicates summed first, rows < 0
// skipped): only those rows of param and moments change. `scratch` is height * width floats
// and `claimed` height ints, both zeroed by the caller.
void AdamLazyRows(const AdamConfig& config, const float* lr, const float* beta1_pow,
                  const float* beta2_pow, const int64_t* rows, const float* value, int64_t num_rows,
                  int64_t width, float* param, float* moment1, float* moment2, float* scratch,
                  int* claimed, float* beta1_pow_out, float* beta2_pow_out, Stream stream);

}  // namespace fleet::operators::cuda
