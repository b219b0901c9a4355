#pragma once
// One Register<Family>Ops per file of this folder; RegisterAllOps calls them all. Adding a family
// means adding its declaration here and its call in register_ops.cc.

#include "framework/op_registry.h"

namespace fleet::operators {

using framework::OpRegistry;

void RegisterIoOps(OpRegistry* registry);          // feed, fetch
void RegisterActivationOps(OpRegistry* registry);  // relu, sigmoid, tanh, scale
// sgd, momentum, adagrad, adam, rmsprop, ftrl, adamax, lamb, decayed_adagrad
void RegisterOptimizerOps(OpRegistry* registry);
// softmax, cross_entropy, softmax_with_cross_entropy, sigmoid_cross_entropy_with_logits, log_loss
void RegisterSoftmaxLossOps(OpRegistry* registry);
void RegisterEmbeddingOps(OpRegistry* registry);  // lookup_table
void RegisterSequenceOps(OpRegistry* registry);   // sequence_pool
void RegisterDropoutOps(OpRegistry* registry);    // dropout
void RegisterMetricOps(OpRegistry* registry);     // accuracy, auc (no gradients)
// elementwise_add/_sub/_mul/_div; mul, matmul; mean, reduce_sum, reduce_mean, sum; concat,
// split, reshape, cast, fill_zeros_like; fill_constant, uniform_random, gaussian_random.
void RegisterElementwiseOps(OpRegistry* registry);
void RegisterMatmulOps(OpRegistry* registry);
void RegisterReduceOps(OpRegistry* registry);
void RegisterShapeOps(OpRegistry* registry);
void RegisterFillOps(OpRegistry* registry);
// lookup_sparse_rows (the local lookup of inference models exported from parameter servers).
void RegisterKeyedLookupOps(OpRegistry* registry);
// transpose, expand, slice, squeeze, unsqueeze, assign, assign_value.
void RegisterTransformOps(OpRegistry* registry);
void RegisterIndexOps(OpRegistry* registry);       // one_hot, top_k
void RegisterClipNormOps(OpRegistry* registry);    // clip, norm (l2_normalize)
void RegisterLrScheduleOps(OpRegistry* registry);  // increment, lr_decay
void RegisterNceOps(OpRegistry* registry);         // nce (word2vec's loss)
// sparse_weight_decay (L2/L1 decay of the rows of an embedding's SelectedRows gradient).
void RegisterSparseDecayOps(OpRegistry* registry);

void RegisterAllOps(OpRegistry* registry);

}  // namespace fleet::operators
