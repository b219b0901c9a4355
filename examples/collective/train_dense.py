"""A dense classifier trained data-parallel on CPU: the same script runs in one process or under
fleetrun, where every rank trains on its shard of the data and gradients are averaged by
allreduce (Gloo).

    python examples/collective/train_dense.py                                   # one process
    fleetrun --collective --nproc_per_node=2 examples/collective/train_dense.py  # two ranks

The data are drawn from a planted two-layer network (so the best accuracy is known to be high);
each rank reads every nranks-th training row. Progress lines give the loss and the samples/s of
the whole job; rank 0 ends with `test_accuracy=<value>`.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import fleet
from fleet import layers
from fleet.role_maker import is_launched

FEATURES, CLASSES = 32, 2


def make_data(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a planted network: x ~ N(0, I), label = argmax of a random 2-layer tanh net."""
    teacher = np.random.default_rng(1234)  # the same teacher for every split
    w1 = teacher.standard_normal((FEATURES, 16)) / np.sqrt(FEATURES)
    w2 = teacher.standard_normal((16, CLASSES))
    x = np.random.default_rng(seed).standard_normal((rows, FEATURES)).astype(np.float32)
    label = np.argmax(np.tanh(x @ w1) @ w2, axis=1).astype(np.int64).reshape(-1, 1)
    return x, label


def build(hidden: int):
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = layers.data("x", [FEATURES], dtype="float32")
        label = layers.data("label", [1], dtype="int64")
        h = layers.fc(layers.fc(x, hidden, act="relu"), hidden, act="relu")
        predict = layers.softmax(layers.fc(h, CLASSES))
        loss = layers.mean(layers.cross_entropy(predict, label))
        test = main.clone(for_test=True)
    return main, startup, test, loss, predict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train_rows", type=int, default=40_000)
    parser.add_argument("--test_rows", type=int, default=10_000)
    parser.add_argument("--batch_size", type=int, default=128, help="per rank")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--learning_rate", type=float, default=3e-3)
    parser.add_argument("--print_period", type=int, default=50)
    args = parser.parse_args(argv)

    # Under fleetrun, a PaddleJob, srun or mpirun the job's role is in the environment; alone,
    # this is a plain run.
    collective = is_launched()
    main_prog, startup, test, loss, predict = build(args.hidden)
    optimizer = fleet.optimizer.Adam(args.learning_rate)
    rank, nranks = 0, 1
    if collective:
        fleet.init(is_collective=True)
        rank, nranks = fleet.worker_index(), fleet.worker_num()
        fleet.distributed_optimizer(optimizer, fleet.DistributedStrategy()).minimize(loss, startup)
    else:
        optimizer.minimize(loss, startup)

    x, label = make_data(args.train_rows, seed=1)
    x, label = x[rank::nranks], label[rank::nranks]
    exe = fleet.Executor(fleet.CPUPlace(), seed=rank + 1)  # startup broadcasts rank 0's values
    exe.run(startup)
    # Every rank runs the same number of steps (the allreduces must pair up).
    steps_per_epoch = args.train_rows // nranks // args.batch_size
    step, window_start = 0, time.perf_counter()
    for epoch in range(args.epochs):
        order = np.random.default_rng(epoch * 100 + rank).permutation(len(x))
        for b in range(steps_per_epoch):
            idx = order[b * args.batch_size : (b + 1) * args.batch_size]
            (batch_loss,) = exe.run(
                main_prog, feed={"x": x[idx], "label": label[idx]}, fetch_list=[loss]
            )
            step += 1
            if step % args.print_period == 0 and rank == 0:
                now = time.perf_counter()
                rate = args.print_period * args.batch_size * nranks / (now - window_start)
                print(
                    f"epoch {epoch} step {step}: loss={batch_loss[0]:.4f} "
                    f"{rate:.0f} samples/s ({nranks} rank(s))",
                    flush=True,
                )
                window_start = now
    tx, tlabel = make_data(args.test_rows, seed=2)
    (probs,) = exe.run(test, feed={"x": tx, "label": tlabel}, fetch_list=[predict])
    accuracy = float(np.mean(np.argmax(probs, axis=1) == tlabel[:, 0]))
    if rank == 0:
        print(f"test_accuracy={accuracy:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
