# Paddle 1.x inference of an exported CTR-DNN (infer.py of the example, reading the test file
# with the same reader). Ported by the imports and nothing else.
import json
import os
import sys

import numpy as np

import fleet as fluid  # was: import paddle.fluid as fluid

model_dir, test_file = sys.argv[1], sys.argv[2]
cont_min_ = [0, -3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
cont_diff_ = [20, 603, 100, 50, 64000, 500, 100, 50, 500, 10, 10, 10, 50]
hash_dim_ = 100003


def parse(line):
    features = line.rstrip("\n").split("\t")
    dense = [
        0.0 if features[i] == "" else (float(features[i]) - cont_min_[i - 1]) / cont_diff_[i - 1]
        for i in range(1, 14)
    ]
    sparse = [hash(str(i) + features[i]) % hash_dim_ for i in range(14, 40)]
    return dense, sparse, int(features[0])


exe = fluid.Executor(fluid.CPUPlace())
[program, feed_names, fetch_targets] = fluid.io.load_inference_model(model_dir, exe)
scores, labels = [], []
with open(test_file) as f:
    lines = f.readlines()
for start in range(0, len(lines), 500):
    samples = [parse(line) for line in lines[start : start + 500]]
    feed = {"dense_input": np.array([s[0] for s in samples], np.float32)}
    for i in range(1, 27):
        ids = np.array([s[1][i - 1] for s in samples], np.int64).reshape(-1, 1)
        feed["C" + str(i)] = fluid.create_lod_tensor(ids, [[1] * len(samples)], fluid.CPUPlace())
    (prob,) = exe.run(program, feed=feed, fetch_list=fetch_targets)
    scores.append(prob[:, 1])
    labels.append(np.array([s[2] for s in samples]))
scores, labels = np.concatenate(scores), np.concatenate(labels)
order = np.argsort(scores, kind="mergesort")
ranks = np.empty(len(scores))
ranks[order] = np.arange(1, len(scores) + 1)
pos = labels == 1
auc = (ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum())
with open(os.path.join(os.environ["OUT_DIR"], "infer.json"), "w") as f:
    json.dump({"test_auc": float(auc), "rows": int(len(labels))}, f)
