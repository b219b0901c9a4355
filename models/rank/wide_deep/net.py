"""Wide & Deep (Cheng et al., 2016) as PaddleRec's models/rank/wide_deep/net.py, ported by its
imports: a linear "wide" part on the dense features plus the DNN on the embedded slots and the
dense features, summed before the sigmoid."""

import math

import fleet as paddle
import fleet.nn.functional as F


class WideDeepLayer(paddle.nn.Layer):
    def __init__(
        self, sparse_feature_number, sparse_feature_dim, dense_feature_dim, num_field, layer_sizes
    ):
        super().__init__()
        self.sparse_feature_number = sparse_feature_number
        self.sparse_feature_dim = sparse_feature_dim
        self.dense_feature_dim = dense_feature_dim
        self.num_field = num_field
        self.layer_sizes = layer_sizes
        self.wide_part = paddle.nn.Linear(
            in_features=self.dense_feature_dim,
            out_features=1,
            weight_attr=paddle.ParamAttr(
                initializer=paddle.nn.initializer.Normal(
                    mean=0.0, std=1.0 / math.sqrt(self.dense_feature_dim)
                )
            ),
        )
        # Xavier rather than PaddleRec's Uniform(-1, 1): see ../dnn/net.py.
        self.embedding = paddle.nn.Embedding(
            self.sparse_feature_number,
            self.sparse_feature_dim,
            sparse=True,
            weight_attr=paddle.ParamAttr(
                name="SparseFeatFactors", initializer=paddle.nn.initializer.XavierUniform()
            ),
        )
        sizes = [sparse_feature_dim * num_field + dense_feature_dim] + self.layer_sizes + [1]
        acts = ["relu" for _ in range(len(self.layer_sizes))] + [None]
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

    def forward(self, sparse_inputs, dense_inputs):
        wide_output = self.wide_part(dense_inputs)
        sparse_embs = []
        for s_input in sparse_inputs:
            emb = self.embedding(s_input)
            emb = paddle.reshape(emb, shape=[-1, self.sparse_feature_dim])
            sparse_embs.append(emb)
        deep_output = paddle.concat(x=sparse_embs + [dense_inputs], axis=1)
        for n_layer in self._mlp_layers:
            deep_output = n_layer(deep_output)
        prediction = paddle.add(x=wide_output, y=deep_output)
        return F.sigmoid(prediction)
