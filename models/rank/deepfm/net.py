"""DeepFM (Guo et al., IJCAI 2017) as PaddleRec's models/rank/deepfm/net.py, ported by its
imports: a factorisation machine (first- and second-order terms over the 26 slots and the 13
dense features, each dense feature with its own embedding vector scaled by its value) and a DNN
on the same embeddings, summed before the sigmoid.

Two things differ from PaddleRec's. Paddle multiplies [N, 13, 1] by [1, 13, D] with broadcasting
on both sides; Fleet's element-wise ops broadcast the second operand only, so the dense values
are first repeated D times along the last axis ([N, 13, D]) and multiplied by [13, D]. And the
dense features' embedding vectors start small and random rather than all ones (see FM)."""

import math

import fleet as paddle
import fleet.nn.functional as F


class DeepFMLayer(paddle.nn.Layer):
    def __init__(
        self,
        sparse_feature_number,
        sparse_feature_dim,
        dense_feature_dim,
        sparse_num_field,
        layer_sizes,
    ):
        super().__init__()
        self.fm = FM(sparse_feature_number, sparse_feature_dim, dense_feature_dim)
        self.dnn = DNN(sparse_feature_dim, sparse_num_field + dense_feature_dim, layer_sizes)

    def forward(self, sparse_inputs, dense_inputs):
        y_first_order, y_second_order, feat_embeddings = self.fm(sparse_inputs, dense_inputs)
        y_dnn = self.dnn(feat_embeddings)
        return F.sigmoid(y_first_order + y_second_order + y_dnn)


class FM(paddle.nn.Layer):
    def __init__(self, sparse_feature_number, sparse_feature_dim, dense_feature_dim):
        super().__init__()
        self.sparse_feature_dim = sparse_feature_dim
        self.dense_feature_dim = dense_feature_dim
        self.init_value_ = 0.1
        std = self.init_value_ / math.sqrt(float(self.sparse_feature_dim))
        self.embedding_one = paddle.nn.Embedding(
            sparse_feature_number,
            1,
            sparse=True,
            weight_attr=paddle.ParamAttr(
                name="SparseFeatFactorsOne",
                initializer=paddle.nn.initializer.Normal(mean=0.0, std=std),
            ),
        )
        self.embedding = paddle.nn.Embedding(
            sparse_feature_number,
            self.sparse_feature_dim,
            sparse=True,
            weight_attr=paddle.ParamAttr(
                name="SparseFeatFactors",
                initializer=paddle.nn.initializer.Normal(mean=0.0, std=std),
            ),
        )
        self.dense_w_one = self.create_parameter(
            shape=[self.dense_feature_dim],
            dtype="float32",
            default_initializer=paddle.nn.initializer.Constant(value=1.0),
        )
        # The dense features' embedding vectors start like the slots' (PaddleRec: all ones, so
        # the second-order term starts at about D * (sum of the dense values)^2 / 2: on the
        # sample data the predictions saturate and the first epochs learn nothing).
        self.dense_w = self.create_parameter(
            shape=[self.dense_feature_dim, self.sparse_feature_dim],
            dtype="float32",
            default_initializer=paddle.nn.initializer.Normal(mean=0.0, std=std),
        )

    def forward(self, sparse_inputs, dense_inputs):
        # first order
        sparse_inputs_concat = paddle.concat(sparse_inputs, axis=1)
        sparse_emb_one = self.embedding_one(sparse_inputs_concat)
        dense_emb_one = paddle.multiply(dense_inputs, self.dense_w_one)
        dense_emb_one = paddle.unsqueeze(dense_emb_one, axis=2)
        y_first_order = paddle.sum(sparse_emb_one, 1) + paddle.sum(dense_emb_one, 1)
        # second order
        sparse_embeddings = self.embedding(sparse_inputs_concat)
        dense_inputs_re = paddle.unsqueeze(dense_inputs, axis=2)
        dense_repeated = paddle.concat([dense_inputs_re] * self.sparse_feature_dim, axis=2)
        dense_embeddings = paddle.multiply(dense_repeated, self.dense_w)
        feat_embeddings = paddle.concat([sparse_embeddings, dense_embeddings], 1)
        summed_features_emb = paddle.sum(feat_embeddings, 1)
        summed_features_emb_square = paddle.square(summed_features_emb)
        squared_features_emb = paddle.square(feat_embeddings)
        squared_sum_features_emb = paddle.sum(squared_features_emb, 1)
        y_second_order = 0.5 * paddle.sum(
            summed_features_emb_square - squared_sum_features_emb, 1, keepdim=True
        )
        return y_first_order, y_second_order, feat_embeddings


class DNN(paddle.nn.Layer):
    def __init__(self, sparse_feature_dim, num_field, layer_sizes):
        super().__init__()
        self.sparse_feature_dim = sparse_feature_dim
        self.num_field = num_field
        sizes = [sparse_feature_dim * num_field] + layer_sizes + [1]
        acts = ["relu" for _ in range(len(layer_sizes))] + [None]
        self._mlp_layers = []
        for i in range(len(layer_sizes) + 1):
            linear = paddle.nn.Linear(
                in_features=sizes[i],
                out_features=sizes[i + 1],
                weight_attr=paddle.ParamAttr(
                    initializer=paddle.nn.initializer.Normal(std=1.0 / math.sqrt(sizes[i]))
                ),
            )
            self.add_sublayer("linear_%d" % i, linear)
            self._mlp_layers.append(linear)
            if acts[i] == "relu":
                act = paddle.nn.ReLU()
                self.add_sublayer("act_%d" % i, act)
                self._mlp_layers.append(act)

    def forward(self, feat_embeddings):
        y_dnn = paddle.reshape(feat_embeddings, [-1, self.num_field * self.sparse_feature_dim])
        for n_layer in self._mlp_layers:
            y_dnn = n_layer(y_dnn)
        return y_dnn
