"""Peer benchmark: word2vec skip-gram with negative sampling on PaddlePaddle 2.6.2's parameter
server (fleet 2.x API, the_one_ps), the model of examples/word2vec/model.py.

Why: benchmarks/word2vec_geo.py runs this in the same run as Fleet's word2vec jobs and reports
the ratio of the throughputs per mode. The model: ``centre`` [N, 1] and ``targets`` [N, 1 + K]
(the context id, then K negatives) as fixed-size MultiSlot slots; an input table (uniform in
+-0.5/dim) and an output table (zeros), both [vocab, dim] and is_sparse; the dot products of the
centre's input vector with the targets' output vectors, the logistic loss of the context
(label 1) and of each negative (label 0), summed per sample and averaged. The optimizer is SGD
(the benchmark's rate) or Adam: the_one_ps refuses every other one ("The dense optimizer in PS
is only supported SGD or Adam"), Adagrad included.

Why 2.6.2: PyPI's 3.3.1 CPU wheel lacks the parameter-server core (see setup.sh).

Both sides read the same MultiSlot files (the benchmark draws the samples from the corpus parts
once) through ``cat``. Worker i reads files i, i+W, ... After training the workers meet (Gloo
barrier: launch with PADDLE_WITH_GLOO=1), worker 0 scores the held-out pairs of --heldout (an
.npz of ``centre`` and ``targets``, the pairs Fleet's job scores) and each worker writes one JSON
line of its figures to --out_dir.

  PADDLE_WITH_GLOO=1 .venv-peers/paddle26/bin/python -m paddle.distributed.launch \
      --server_num=1 --worker_num=2 benchmarks/peers/paddle_ps_word2vec.py --mode geo \
      --train_files part-0.multislot part-1.multislot --pipe_command cat --vocab_size V \
      --heldout heldout.npz --out_dir DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys

# isort: off
import paddle_ps_common as common  # first: it sets the thread counts before Paddle loads
import numpy as np
import paddle

# isort: on

baselines = common.load_example("ctr_dnn", "baselines")


def build(args: argparse.Namespace):
    """(main, startup, use_vars in MultiSlot order, loss, logits, optimizer) before minimize."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = args.seed
    k, dim = args.negatives, args.dim
    with paddle.static.program_guard(main, startup):
        centre = paddle.static.data("centre", [None, 1], "int64")
        targets = paddle.static.data("targets", [None, 1 + k], "int64")
        bound = 0.5 / dim
        centre_vector = paddle.static.nn.embedding(  # [N, 1, dim]
            centre,
            [args.vocab_size, dim],
            is_sparse=True,
            param_attr=paddle.ParamAttr(
                name="w2v_input", initializer=paddle.nn.initializer.Uniform(-bound, bound)
            ),
        )
        target_vectors = paddle.static.nn.embedding(  # [N, 1 + K, dim]
            targets,
            [args.vocab_size, dim],
            is_sparse=True,
            param_attr=paddle.ParamAttr(
                name="w2v_output", initializer=paddle.nn.initializer.Constant(0.0)
            ),
        )
        scores = paddle.matmul(target_vectors, centre_vector, transpose_y=True)
        logits = paddle.reshape(scores, [-1, 1 + k])
        label = paddle.concat(
            [paddle.ones_like(logits[:, :1]), paddle.zeros_like(logits[:, 1:])], axis=1
        )
        losses = paddle.nn.functional.binary_cross_entropy_with_logits(
            logits, label, reduction="none"
        )
        loss = paddle.mean(paddle.sum(losses, axis=1))
    if args.optimizer == "sgd":
        optimizer = paddle.optimizer.SGD(learning_rate=args.learning_rate)
    else:
        optimizer = paddle.optimizer.Adam(learning_rate=args.learning_rate, lazy_mode=True)
    return main, startup, [centre, targets], loss, logits, optimizer


def heldout_auc(exe, program, logits, path: str) -> float:  # noqa: ANN001
    """AUC of the context scores (label 1) against the negatives' (label 0) on the pairs of
    `path`, as examples/word2vec/train.py's heldout_auc."""
    pairs = np.load(path)
    scores = []
    for start in range(0, len(pairs["centre"]), 4096):
        stop = start + 4096
        (out,) = exe.run(
            program,
            feed={"centre": pairs["centre"][start:stop], "targets": pairs["targets"][start:stop]},
            fetch_list=[logits],
        )
        scores.append(np.asarray(out))
    scores = np.concatenate(scores)
    labels = np.zeros(scores.shape, dtype=np.int64)
    labels[:, 0] = 1
    return float(baselines.roc_auc(labels.ravel(), scores.ravel()))


def run_ps(args: argparse.Namespace) -> dict | None:
    from paddle.distributed import fleet

    fleet.init()
    return common.run_ps_job(
        args,
        build(args),
        lambda exe, test, logits: {"heldout_auc": heldout_auc(exe, test, logits, args.heldout)},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("async", "geo"), required=True)
    # Not --train / --test: paddle.distributed.launch takes abbreviations of its own options.
    parser.add_argument("--train_files", nargs="+", required=True, help="MultiSlot samples")
    parser.add_argument("--pipe_command", default="cat")
    parser.add_argument("--heldout", required=True, help=".npz of centre [N, 1], targets")
    parser.add_argument("--vocab_size", type=int, required=True)
    parser.add_argument("--out_dir", required=True, help="each worker writes worker<i>.json")
    parser.add_argument("--thread", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--k_steps", type=int, default=100, help="GEO: steps between syncs")
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--negatives", type=int, default=5)
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    parser.add_argument("--learning_rate", type=float, default=6.4)
    parser.add_argument("--print_period", type=int, default=1000000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    paddle.enable_static()
    paddle.seed(args.seed)
    result = run_ps(args)
    if result is None:
        return 0
    result.update(mode=args.mode, paddle_version=paddle.__version__)
    with open(os.path.join(args.out_dir, f"worker{result['worker']}.json"), "w") as f:
        json.dump(result, f)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
