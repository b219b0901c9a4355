import fleet
import fleet as paddle
import fleet.nn as nn
import fleet.nn.functional as F


class WideDeepLite(nn.Layer):
    def __init__(self, slots, vocab, emb_dim, dense_dim, hidden):
        super().__init__()
        self.embedding = nn.Embedding(
            vocab,
            emb_dim,
            sparse=True,
            weight_attr=paddle.ParamAttr(
                name="user_emb", initializer=nn.initializer.Uniform(-0.05, 0.05)
            ),
        )
        self.layers = nn.LayerList(
            [nn.Linear(slots * emb_dim + dense_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1)]
        )

    def forward(self, dense, sparse):
        pooled = [paddle.sum(self.embedding(ids), axis=1) for ids in sparse]
        x = paddle.concat(pooled + [dense], axis=1)
        for layer in self.layers:
            x = layer(x)
        return x


class StaticModel:
    def __init__(self, config):
        self.config = config
        self.slots = config.get("hyper_parameters.slots")
        self.learning_rate = config.get("hyper_parameters.optimizer.learning_rate")

    def create_feeds(self, is_infer=False):
        dense = paddle.static.data(
            "dense_input", [None, self.config.get("hyper_parameters.dense_dim")], "float32"
        )
        sparse = [
            paddle.static.data("s%d" % (i + 1), [None, 1], "int64", lod_level=0)
            for i in range(self.slots)
        ]
        label = paddle.static.data("label", [None, 1], "int64")
        return [dense] + sparse + [label]

    def net(self, inputs, is_infer=False):
        dense, sparse, label = inputs[0], inputs[1:-1], inputs[-1]
        model = WideDeepLite(
            self.slots,
            self.config.get("hyper_parameters.vocab"),
            self.config.get("hyper_parameters.emb_dim"),
            self.config.get("hyper_parameters.dense_dim"),
            self.config.get("hyper_parameters.hidden"),
        )
        logit = model(dense, sparse)
        predict = F.sigmoid(logit)
        auc, _, _ = paddle.static.auc(paddle.concat([1 - predict, predict], axis=1), label)
        if is_infer:
            return {"auc": auc}
        cost = paddle.mean(F.binary_cross_entropy(predict, paddle.cast(label, "float32")))
        self._cost = cost
        return {"cost": cost, "auc": auc}

    def create_optimizer(self, strategy=None):
        optimizer = paddle.optimizer.Adam(learning_rate=self.learning_rate, lazy_mode=True)
        if strategy is not None:
            optimizer = fleet.distributed_optimizer(optimizer, strategy)
        optimizer.minimize(self._cost)

    def infer_net(self, inputs):
        return self.net(inputs, is_infer=True)
