"""CTR-DNN as a PaddleRec static model (models/rank/dnn/static_model.py, ported by its imports:
`import paddle` -> `import fleet as paddle`, `paddle.distributed.fleet` -> `fleet`)."""

from net import DNNLayer

import fleet
import fleet as paddle


class StaticModel:
    def __init__(self, config):
        self.cost = None
        self.infer_target_var = None
        self.config = config
        self._init_hyper_parameters()

    def _init_hyper_parameters(self):
        self.sparse_feature_number = self.config.get("hyper_parameters.sparse_feature_number")
        self.sparse_feature_dim = self.config.get("hyper_parameters.sparse_feature_dim")
        self.sparse_inputs_slot = self.config.get("hyper_parameters.sparse_inputs_slots")
        self.dense_input_dim = self.config.get("hyper_parameters.dense_input_dim")
        self.learning_rate = self.config.get("hyper_parameters.optimizer.learning_rate")
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
        dnn_model = DNNLayer(
            self.sparse_feature_number,
            self.sparse_feature_dim,
            self.dense_input_dim,
            sparse_number,
            self.fc_sizes,
        )
        raw_predict_2d = dnn_model.forward(self.sparse_inputs, self.dense_input)
        predict_2d = paddle.nn.functional.softmax(raw_predict_2d)
        self.predict = predict_2d
        auc, batch_auc, _ = paddle.static.auc(
            input=self.predict, label=self.label_input, num_thresholds=2**12, slide_steps=20
        )
        self.inference_target_var = auc
        if is_infer:
            return {"auc": auc}
        cost = paddle.nn.functional.cross_entropy(input=raw_predict_2d, label=self.label_input)
        avg_cost = paddle.mean(x=cost)
        self._cost = avg_cost
        return {"cost": avg_cost, "auc": auc}

    def create_optimizer(self, strategy=None):
        optimizer = paddle.optimizer.Adam(learning_rate=self.learning_rate, lazy_mode=True)
        if strategy is not None:
            optimizer = fleet.distributed_optimizer(optimizer, strategy)
        optimizer.minimize(self._cost)

    def infer_net(self, input):
        return self.net(input, is_infer=True)
