# CTR-DNN as Paddle 1.x users write it (PaddleRec 1.7's ctr/dnn network, dataset version).
# Ported to Fleet by the import below and nothing else.
import math

import fleet as fluid  # was: import paddle.fluid as fluid

dense_feature_dim = 13


def ctr_dnn_model_dataset(embedding_size, sparse_feature_dim):
    dense_input = fluid.layers.data(name="dense_input", shape=[dense_feature_dim], dtype="float32")
    sparse_input_ids = [
        fluid.layers.data(name="C" + str(i), shape=[1], lod_level=1, dtype="int64")
        for i in range(1, 27)
    ]
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")

    def embedding_layer(input):
        emb = fluid.layers.embedding(
            input=input,
            is_sparse=True,
            size=[sparse_feature_dim, embedding_size],
            param_attr=fluid.ParamAttr(
                name="SparseFeatFactors",
                initializer=fluid.initializer.Uniform(low=-0.01, high=0.01),
            ),
        )
        return fluid.layers.sequence_pool(input=emb, pool_type="average")

    sparse_embed_seq = list(map(embedding_layer, sparse_input_ids))
    concated = fluid.layers.concat(sparse_embed_seq + [dense_input], axis=1)
    fc1 = fluid.layers.fc(
        input=concated,
        size=64,
        act="relu",
        param_attr=fluid.ParamAttr(
            initializer=fluid.initializer.Normal(scale=1 / math.sqrt(concated.shape[1]))
        ),
    )
    fc2 = fluid.layers.fc(
        input=fc1,
        size=64,
        act="relu",
        param_attr=fluid.ParamAttr(
            initializer=fluid.initializer.Normal(scale=1 / math.sqrt(fc1.shape[1]))
        ),
    )
    predict = fluid.layers.fc(
        input=fc2,
        size=2,
        act="softmax",
        param_attr=fluid.ParamAttr(
            initializer=fluid.initializer.Normal(scale=1 / math.sqrt(fc2.shape[1]))
        ),
    )
    cost = fluid.layers.cross_entropy(input=predict, label=label)
    avg_cost = fluid.layers.reduce_sum(cost)
    accuracy = fluid.layers.accuracy(input=predict, label=label)
    auc_var, batch_auc_var, auc_states = fluid.layers.auc(
        input=predict, label=label, num_thresholds=2**12, slide_steps=20
    )
    data_list = [dense_input] + sparse_input_ids + [label]
    return avg_cost, auc_var, batch_auc_var, accuracy, predict, data_list
