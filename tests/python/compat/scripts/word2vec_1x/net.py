# PaddleRec 1.7's word2vec network (models/recall/word2vec: skip-gram with negative sampling,
# the negatives drawn by the reader), as its users write it with fluid. Ported by the import
# below and nothing else.
import fleet as fluid  # was: import paddle.fluid as fluid


def word2vec_net(sparse_feature_number, sparse_feature_dim, neg_num):
    input_word = fluid.data(name="input_word", shape=[None, 1], dtype="int64")
    true_word = fluid.data(name="true_label", shape=[None, 1], dtype="int64")
    neg_word = fluid.data(name="neg_label", shape=[None, neg_num], dtype="int64")

    def embedding_layer(input, table_name, emb_dim, initializer_instance=None, squeeze=False):
        emb = fluid.embedding(
            input=input,
            is_sparse=True,
            size=[sparse_feature_number, emb_dim],
            param_attr=fluid.ParamAttr(name=table_name, initializer=initializer_instance),
        )
        if squeeze:
            return fluid.layers.squeeze(input=emb, axes=[1])
        return emb

    # Input vectors start small and random, output vectors and biases at zero (word2vec.c).
    init_width = 0.5 / sparse_feature_dim
    emb_initializer = fluid.initializer.Uniform(-init_width, init_width)
    emb_w_initializer = fluid.initializer.Constant(value=0.0)

    input_emb = embedding_layer(input_word, "emb", sparse_feature_dim, emb_initializer, True)
    true_emb_w = embedding_layer(true_word, "emb_w", sparse_feature_dim, emb_w_initializer, True)
    true_emb_b = embedding_layer(true_word, "emb_b", 1, emb_w_initializer, True)
    neg_emb_w = embedding_layer(neg_word, "emb_w", sparse_feature_dim, emb_w_initializer)
    neg_emb_b = embedding_layer(neg_word, "emb_b", 1, emb_w_initializer)
    neg_emb_b_vec = fluid.layers.reshape(neg_emb_b, shape=[-1, neg_num])

    # The context word's score: <input vector, output vector> + its bias; the negatives' by a
    # batched product of [N, 1, dim] and [N, neg_num, dim]^T.
    true_logits = fluid.layers.elementwise_add(
        fluid.layers.reduce_sum(
            fluid.layers.elementwise_mul(input_emb, true_emb_w), dim=1, keep_dim=True
        ),
        true_emb_b,
    )
    input_emb_re = fluid.layers.reshape(input_emb, shape=[-1, 1, sparse_feature_dim])
    neg_matmul = fluid.layers.matmul(input_emb_re, neg_emb_w, transpose_y=True)
    neg_logits = fluid.layers.elementwise_add(
        fluid.layers.reshape(neg_matmul, shape=[-1, neg_num]), neg_emb_b_vec
    )

    label_ones = fluid.layers.fill_constant_batch_size_like(
        true_logits, shape=[-1, 1], value=1.0, dtype="float32"
    )
    label_zeros = fluid.layers.fill_constant_batch_size_like(
        true_logits, shape=[-1, neg_num], value=0.0, dtype="float32"
    )
    true_xent = fluid.layers.sigmoid_cross_entropy_with_logits(true_logits, label_ones)
    neg_xent = fluid.layers.sigmoid_cross_entropy_with_logits(neg_logits, label_zeros)
    cost = fluid.layers.elementwise_add(
        fluid.layers.reduce_sum(true_xent, dim=1), fluid.layers.reduce_sum(neg_xent, dim=1)
    )
    avg_cost = fluid.layers.reduce_mean(cost)
    return [input_word, true_word, neg_word], avg_cost, true_logits, neg_logits


def optimizer(learning_rate, decay_steps, decay_rate):
    return fluid.optimizer.SGD(
        learning_rate=fluid.layers.exponential_decay(
            learning_rate=learning_rate,
            decay_steps=decay_steps,
            decay_rate=decay_rate,
            staircase=True,
        )
    )
