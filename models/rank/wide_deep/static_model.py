"""Wide & Deep as a PaddleRec static model (models/rank/wide_deep/static_model.py, ported by
its imports)."""

from net import WideDeepLayer

import fleet
import fleet as paddle
from fleet.rec import rate_scaling


class StaticModel:
    def __init__(self, config):
        self.cost = None
        self.config = config
        self._init_hyper_parameters()

    def _init_hyper_parameters(self):
        self.sparse_feature_number = self.config.get("hyper_parameters.sparse_feature_number")
        self.sparse_feature_dim = self.config.get("hyper_parameters.sparse_feature_dim")
        self.sparse_inputs_slot = self.config.get("hyper_parameters.sparse_inputs_slots")
        self.dense_input_dim = self.config.get("hyper_parameters.dense_input_dim")
        self.fc_sizes = self.config.get("hyper_parameters.fc_sizes")

    def create_feeds(self, is_infer=False):
        dense_input = paddle.static.data(
            name="dense_input", shape=[None, self.dense_input_dim], dtype="float32"
        )
        sparse_input_ids = [
            paddle.static.data(name="C" + str(i), shape=[None, 1], lod_level=1, dtype="int64")
            for i in range(1, self.sparse_inputs_slot)
        ]
        label = paddle.static.data(name="label", shape=[None, 1], dtype="int64")
        return [label] + sparse_input_ids + [dense_input]

    def net(self, input, is_infer=False):
        self.label_input = input[0]
        self.sparse_inputs = input[1 : self.sparse_inputs_slot]
        self.dense_input = input[-1]
        sparse_number = self.sparse_inputs_slot - 1
        wide_deep_model = WideDeepLayer(
            self.sparse_feature_number,
            self.sparse_feature_dim,
            self.dense_input_dim,
            sparse_number,
            self.fc_sizes,
        )
        pred = wide_deep_model.forward(self.sparse_inputs, self.dense_input)
        predict_2d = paddle.concat(x=[1 - pred, pred], axis=1)
        label_int = paddle.cast(self.label_input, "int64")
        auc, batch_auc_var, _ = paddle.static.auc(input=predict_2d, label=label_int, slide_steps=0)
        self.inference_target_var = auc
        if is_infer:
            return {"auc": auc}
        cost = paddle.nn.functional.log_loss(
            input=pred, label=paddle.cast(self.label_input, dtype="float32")
        )
        avg_cost = paddle.mean(x=cost)
        self._cost = avg_cost
        return {"cost": avg_cost, "auc": auc}

    def create_optimizer(self, strategy=None):
        # hyper_parameters.optimizer.scale_rate_by_trainers: as many Adam steps per sample in
        # every mode (fleet/rec/rate_scaling.py; async with every worker reading every row: half
        # the rate with 2 workers).
        rate = rate_scaling.learning_rate(self.config, strategy)
        optimizer = paddle.optimizer.Adam(learning_rate=rate, lazy_mode=True)
        if strategy is not None:
            optimizer = fleet.distributed_optimizer(optimizer, strategy)
        optimizer.minimize(self._cost)

    def infer_net(self, input):
        return self.net(input, is_infer=True)
