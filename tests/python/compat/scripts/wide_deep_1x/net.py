# Wide & Deep as Paddle 1.x users write it (PaddleRec 1.7's ctr/wide_deep network on census-style
# inputs: a wide linear part and a deep tower, summed, sigmoid). Ported by the import only.
import math

import fleet as fluid  # was: import paddle.fluid as fluid


def input_data():
    wide_input = fluid.data(name="wide_input", shape=[None, 8], dtype="float32")
    deep_input = fluid.data(name="deep_input", shape=[None, 58], dtype="float32")
    label = fluid.data(name="label", shape=[None, 1], dtype="float32")
    return [wide_input, deep_input, label]


def fc(input, output_dim, act):
    return fluid.layers.fc(
        input=input,
        size=output_dim,
        act=act,
        param_attr=fluid.ParamAttr(
            initializer=fluid.initializer.TruncatedNormal(
                loc=0.0, scale=1.0 / math.sqrt(input.shape[1])
            )
        ),
    )


def wide_deep(wide_input, deep_input, label, hidden1_units, hidden2_units, hidden3_units):
    wide_output = fluid.layers.fc(
        input=wide_input,
        size=1,
        param_attr=fluid.ParamAttr(
            initializer=fluid.initializer.TruncatedNormal(
                loc=0.0, scale=1.0 / math.sqrt(wide_input.shape[1])
            ),
            regularizer=fluid.regularizer.L2DecayRegularizer(regularization_coeff=1e-4),
        ),
        act=None,
        name="wide",
    )
    l1 = fc(deep_input, hidden1_units, "relu")
    l2 = fc(l1, hidden2_units, "relu")
    l3 = fc(l2, hidden3_units, "relu")
    deep_output = fc(l3, 1, None)
    prediction = fluid.layers.elementwise_add(wide_output, deep_output)
    pred = fluid.layers.sigmoid(fluid.layers.clip(prediction, min=-15.0, max=15.0))
    num_seqs = fluid.layers.create_tensor(dtype="int64")
    acc = fluid.layers.accuracy(
        input=fluid.layers.concat([1 - pred, pred], 1),
        label=fluid.layers.cast(label, dtype="int64"),
        total=num_seqs,
    )
    auc_var, batch_auc, auc_states = fluid.layers.auc(
        input=fluid.layers.concat([1 - pred, pred], 1),
        label=fluid.layers.cast(label, dtype="int64"),
    )
    cost = fluid.layers.sigmoid_cross_entropy_with_logits(
        x=prediction, label=fluid.layers.cast(label, dtype="float32")
    )
    avg_cost = fluid.layers.mean(cost)
    return avg_cost, acc, auc_var, pred
