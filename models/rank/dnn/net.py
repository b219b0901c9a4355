"""CTR-DNN's network (PaddleRec's models/rank/dnn/net.py, ported by its imports): the 26 slots
share one sparse embedding table; their rows and the 13 dense features go through fc layers with
ReLU to 2 logits."""

import math

import fleet as paddle


class DNNLayer(paddle.nn.Layer):
    def __init__(
        self, sparse_feature_number, sparse_feature_dim, dense_feature_dim, num_field, layer_sizes
    ):
        super().__init__()
        self.sparse_feature_number = sparse_feature_number
        self.sparse_feature_dim = sparse_feature_dim
        self.dense_feature_dim = dense_feature_dim
        self.num_field = num_field
        self.layer_sizes = layer_sizes
        # Xavier (about +-0.0024 for 1M x 10 rows) where PaddleRec has Uniform(-1, 1): with rows
        # that large the network memorises rare ids from their random start, which cost 0.015-0.025
        # test AUC on 200k Criteo rows (examples/ctr_dnn/model.py, which this model matches).
        self.embedding = paddle.nn.Embedding(
            self.sparse_feature_number,
            self.sparse_feature_dim,
            sparse=True,
            weight_attr=paddle.ParamAttr(
                name="SparseFeatFactors", initializer=paddle.nn.initializer.XavierUniform()
            ),
        )
        sizes = [sparse_feature_dim * num_field + dense_feature_dim] + self.layer_sizes + [2]
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
        sparse_embs = []
        for s_input in sparse_inputs:
            emb = self.embedding(s_input)
            emb = paddle.reshape(emb, shape=[-1, self.sparse_feature_dim])
            sparse_embs.append(emb)
        y_dnn = paddle.concat(x=sparse_embs + [dense_inputs], axis=1)
        for n_layer in self._mlp_layers:
            y_dnn = n_layer(y_dnn)
        return y_dnn
