# Scores held-out (centre, context, negatives) samples with an exported word2vec model, as a
# Paddle 1.x user runs an inference model; writes the pair AUC (context scores against negative
# scores) to $OUT_DIR/infer.json. Ported by the import and nothing else. argv: model dir, npz.
import json
import os
import sys

import numpy as np

import fleet as fluid  # was: import paddle.fluid as fluid

model_dir, samples = sys.argv[1], np.load(sys.argv[2])
exe = fluid.Executor(fluid.CPUPlace())
[program, feed_names, fetch_targets] = fluid.io.load_inference_model(model_dir, exe)
true_scores, neg_scores = [], []
for start in range(0, len(samples["input_word"]), 500):
    feed = {name: samples[name][start : start + 500] for name in feed_names}
    true_logits, neg_logits = exe.run(program, feed=feed, fetch_list=fetch_targets)
    true_scores.append(true_logits.reshape(-1))
    neg_scores.append(neg_logits.reshape(-1))
scores = np.concatenate(true_scores + neg_scores)
labels = np.concatenate([np.ones(sum(map(len, true_scores))), np.zeros(sum(map(len, neg_scores)))])
order = np.argsort(scores, kind="mergesort")
ranks = np.empty(len(scores))
ranks[order] = np.arange(1, len(scores) + 1)
pos = labels == 1
auc = (ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum())
with open(os.path.join(os.environ["OUT_DIR"], "infer.json"), "w") as f:
    json.dump({"pair_auc": float(auc), "pairs": int(pos.sum())}, f)
