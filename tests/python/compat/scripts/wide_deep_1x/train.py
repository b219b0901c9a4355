# Paddle 1.x local training of Wide & Deep (train.py of the example, NumPy batches instead of the
# census reader), then its inference export. Ported by the import only. argv: data.npz, out dir.
import json
import os
import sys

import numpy as np
from net import input_data, wide_deep

import fleet as fluid  # was: import paddle.fluid as fluid

data = np.load(sys.argv[1])
out = sys.argv[2]
wide_input, deep_input, label = input_data()
avg_cost, acc, auc_var, pred = wide_deep(wide_input, deep_input, label, 75, 50, 25)
fluid.optimizer.AdagradOptimizer(learning_rate=0.01).minimize(avg_cost)

exe = fluid.Executor(fluid.CPUPlace())
exe.run(fluid.default_startup_program())
train_prog = fluid.default_main_program()
n = len(data["label"]) * 4 // 5
for epoch in range(3):
    for start in range(0, n, 64):
        batch = slice(start, min(start + 64, n))
        loss, auc = exe.run(
            train_prog,
            feed={
                "wide_input": data["wide"][batch],
                "deep_input": data["deep"][batch],
                "label": data["label"][batch],
            },
            fetch_list=[avg_cost, auc_var],
        )
fluid.io.save_inference_model(os.path.join(out, "model"), ["wide_input", "deep_input"], [pred], exe)
with open(os.path.join(out, "train.json"), "w") as f:
    json.dump({"loss": float(loss[0]), "train_auc": float(auc[0])}, f)
