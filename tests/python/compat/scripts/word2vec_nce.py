# Skip-gram word2vec with NCE as Paddle 1.x users write it (fluid.layers.nce over an embedding,
# the book's and the distributed tests' form), ported by the import only. argv: pairs.npz, out.
import json
import os
import sys

import numpy as np

import fleet as fluid  # was: import paddle.fluid as fluid

data = np.load(sys.argv[1])
out = sys.argv[2]
dict_size, embedding_size, neg_num = int(data["dict_size"]), 16, 5

input_word = fluid.layers.data(name="input_word", shape=[1], dtype="int64")
true_word = fluid.layers.data(name="true_label", shape=[1], dtype="int64")
emb = fluid.layers.embedding(
    input=input_word,
    size=[dict_size, embedding_size],
    is_sparse=True,
    param_attr=fluid.ParamAttr(
        name="emb",
        initializer=fluid.initializer.Uniform(-0.5 / embedding_size, 0.5 / embedding_size),
    ),
)
cost = fluid.layers.nce(
    input=emb,
    label=true_word,
    num_total_classes=dict_size,
    param_attr=fluid.ParamAttr(name="nce_w", initializer=fluid.initializer.Constant(0.0)),
    bias_attr=fluid.ParamAttr(name="nce_b", initializer=fluid.initializer.Constant(0.0)),
    num_neg_samples=neg_num,
    sampler="uniform",
    seed=1,
)
avg_cost = fluid.layers.reduce_mean(cost)
fluid.optimizer.Adam(learning_rate=0.01).minimize(avg_cost)

exe = fluid.Executor(fluid.CPUPlace())
exe.run(fluid.default_startup_program())
losses = []
for epoch in range(3):
    for start in range(0, len(data["center"]), 128):
        batch = slice(start, start + 128)
        (loss,) = exe.run(
            fluid.default_main_program(),
            feed={"input_word": data["center"][batch], "true_label": data["context"][batch]},
            fetch_list=[avg_cost],
        )
        losses.append(float(loss[0]))
with open(os.path.join(out, "losses.json"), "w") as f:
    json.dump({"first": float(np.mean(losses[:20])), "last": float(np.mean(losses[-20:]))}, f)
