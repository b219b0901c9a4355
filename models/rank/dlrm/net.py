"""DLRM (Naumov et al., 2019) as PaddleRec's models/rank/dlrm/net.py, ported by its imports: a
bottom MLP takes the dense features to the embedding width, the pairwise dot products of the 27
vectors (26 slot embeddings and the bottom MLP's output) are the "dot interaction", and a top MLP
reads the bottom output and the interactions.

One step differs from PaddleRec's: it keeps the strict upper triangle of the [27, 27] matrix of
dot products with triu/tril, masked_select and a sentinel value, which Fleet lacks; here the top
MLP reads the whole matrix, flattened. A linear layer over a symmetric matrix's entries computes
the same functions as one over its upper triangle and diagonal (tied weights add up), so the
model class is the same; the first top layer has 27 * 27 inputs instead of 351."""

import math

import fleet as paddle
import fleet.nn.functional as F


class DLRMLayer(paddle.nn.Layer):
    def __init__(
        self,
        dense_feature_dim,
        bot_layer_sizes,
        sparse_feature_number,
        sparse_feature_dim,
        top_layer_sizes,
        num_field,
        dense_rate_scale=1.0,
    ):
        super().__init__()
        self.dense_feature_dim = dense_feature_dim
        self.bot_layer_sizes = bot_layer_sizes
        self.sparse_feature_number = sparse_feature_number
        self.sparse_feature_dim = sparse_feature_dim
        self.top_layer_sizes = top_layer_sizes
        self.num_field = num_field
        # The MLPs' weights and biases train at dense_rate_scale times the optimizer's rate (their
        # ParamAttr(learning_rate)), the embedding at the optimizer's: see static_model.py.
        self.dense_rate_scale = dense_rate_scale
        self.bot_mlp = paddle.nn.LayerList(
            self._mlp([dense_feature_dim] + bot_layer_sizes + [sparse_feature_dim], True)
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
        interactions = (num_field + 1) * (num_field + 1)
        self.top_mlp = paddle.nn.LayerList(
            self._mlp([interactions + sparse_feature_dim] + top_layer_sizes + [1], False)
        )

    def _mlp(self, sizes, relu_last):
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(
                paddle.nn.Linear(
                    in_features=sizes[i],
                    out_features=sizes[i + 1],
                    weight_attr=paddle.ParamAttr(
                        initializer=paddle.nn.initializer.Normal(
                            std=math.sqrt(2.0 / (sizes[i] + sizes[i + 1]))
                        ),
                        learning_rate=self.dense_rate_scale,
                    ),
                    bias_attr=paddle.ParamAttr(
                        initializer=paddle.nn.initializer.Normal(std=math.sqrt(1.0 / sizes[i + 1])),
                        learning_rate=self.dense_rate_scale,
                    ),
                )
            )
            if i < len(sizes) - 2 or relu_last:
                layers.append(paddle.nn.ReLU())
        return layers

    def forward(self, sparse_inputs, dense_inputs):
        x = dense_inputs
        for layer in self.bot_mlp:
            x = layer(x)
        sparse_embs = []
        for s_input in sparse_inputs:
            emb = self.embedding(s_input)
            emb = paddle.reshape(emb, shape=[-1, self.sparse_feature_dim])
            sparse_embs.append(emb)
        # dot interaction
        T = paddle.reshape(
            paddle.concat(x=sparse_embs + [x], axis=1),
            [-1, self.num_field + 1, self.sparse_feature_dim],
        )
        Z = paddle.matmul(T, T, transpose_y=True)
        Zflat = paddle.reshape(Z, [-1, (self.num_field + 1) * (self.num_field + 1)])
        y = paddle.concat([x, Zflat], axis=1)
        for layer in self.top_mlp:
            y = layer(y)
        return F.sigmoid(y)
