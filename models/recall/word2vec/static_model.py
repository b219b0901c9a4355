"""Word2vec (skip-gram, negative sampling) as a PaddleRec static model
(models/recall/word2vec/static_model.py, ported by its imports). Besides the cost, net() reports
the AUC of the true context words' scores against the negatives' (the pairs ranked right),
which PaddleRec's model does not: it shows the training working in every mode without the
analogy test set; infer_net() reports the same AUC on held-out sentences."""

from net import Word2VecLayer

import fleet
import fleet as paddle
import fleet.nn.functional as F
from fleet.rec import rate_scaling


class StaticModel:
    def __init__(self, config):
        self.cost = None
        self.config = config
        self._init_hyper_parameters()

    def _init_hyper_parameters(self):
        self.sparse_feature_number = self.config.get("hyper_parameters.sparse_feature_number")
        self.sparse_feature_dim = self.config.get("hyper_parameters.sparse_feature_dim")
        self.neg_num = self.config.get("hyper_parameters.neg_num")

    def create_feeds(self, is_infer=False):
        input_word = paddle.static.data(name="input_word", shape=[None, 1], dtype="int64")
        true_word = paddle.static.data(name="true_label", shape=[None, 1], dtype="int64")
        neg_word = paddle.static.data(name="neg_label", shape=[None, self.neg_num], dtype="int64")
        return [input_word, true_word, neg_word]

    def net(self, inputs, is_infer=False):
        word2vec_model = Word2VecLayer(
            self.sparse_feature_number,
            self.sparse_feature_dim,
            self.neg_num,
            "emb",
            "emb_w",
            "emb_b",
        )
        true_logits, neg_logits = word2vec_model.forward(inputs)
        label_ones = paddle.full_like(true_logits, fill_value=1.0, dtype="float32")
        label_zeros = paddle.full_like(neg_logits, fill_value=0.0, dtype="float32")
        true_prob = F.sigmoid(true_logits)
        neg_prob = F.sigmoid(neg_logits)
        scores = paddle.reshape(paddle.concat([true_prob, neg_prob], axis=1), [-1, 1])
        labels = paddle.reshape(
            paddle.cast(paddle.concat([label_ones, label_zeros], axis=1), "int64"), [-1, 1]
        )
        auc, _, _ = paddle.static.auc(input=scores, label=labels)
        if is_infer:
            return {"auc": auc}
        true_xent = F.binary_cross_entropy(true_prob, label_ones, reduction="none")
        neg_xent = F.binary_cross_entropy(neg_prob, label_zeros, reduction="none")
        cost = paddle.add(paddle.sum(true_xent, axis=1), paddle.sum(neg_xent, axis=1))
        avg_cost = paddle.mean(x=cost)
        self._cost = avg_cost
        return {"cost": avg_cost, "auc": auc}

    def create_optimizer(self, strategy=None):
        # hyper_parameters.optimizer.scale_rate_by_trainers: the same rate per sample in every
        # mode (fleet/rec/rate_scaling.py).
        rate = rate_scaling.learning_rate(self.config, strategy)
        optimizer = paddle.optimizer.SGD(learning_rate=rate)
        if strategy is not None:
            optimizer = fleet.distributed_optimizer(optimizer, strategy)
        optimizer.minimize(self._cost)

    def infer_net(self, inputs):
        return self.net(inputs, is_infer=True)
