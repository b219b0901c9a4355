"""CTR-DNN trained data-parallel on CPU: every rank holds every parameter, ids are hashed into a
bounded embedding table (`--sparse_dim` rows), and after backward the gradients are averaged by
allreduce (the embedding's sparse gradient gathered as ids and rows). The same script runs in one
process or under fleetrun:

    python examples/collective/train_ctr_dnn.py --train train.txt --test test.txt
    fleetrun --collective --nproc_per_node=2 examples/collective/train_ctr_dnn.py \\
        --train train.txt --test test.txt

Rank r trains on batches r, r + n, r + 2n, ... (every rank the same number of steps, since the
allreduces must pair up). Progress lines give the loss and the job's samples/s; rank 0 ends with
`test_auc=<value>` on the test file.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "ctr_dnn"))

import baselines  # noqa: E402
import criteo_reader  # noqa: E402
import model  # noqa: E402
import train  # noqa: E402

import fleet  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--train", nargs="+", required=True, help="Criteo-format training files")
    parser.add_argument("--test", required=True, help="Criteo-format test file")
    train.add_model_arguments(parser)
    parser.add_argument("--print_period", type=int, default=100, help="steps between logs")
    parser.add_argument("--seed", type=int, default=1)
    parser.set_defaults(sparse_dim=100_001)  # hashed ids: a table every rank holds
    args = parser.parse_args(argv)
    if not train.inputs_exist(list(args.train) + [args.test]):
        return 2

    collective = "PADDLE_TRAINER_ENDPOINTS" in os.environ  # under fleetrun --collective
    rank, nranks, wrap = 0, 1, None
    if collective:
        fleet.init(is_collective=True)
        rank, nranks = fleet.worker_index(), fleet.worker_num()

        def wrap(opt):
            return fleet.distributed_optimizer(opt, fleet.DistributedStrategy())

    cfg = model.ModelConfig(
        sparse_dim=args.sparse_dim,
        embedding_dim=args.embedding_dim,
        optimizer=args.optimizer,
        learning_rate=args.learning_rate,
        seed=args.seed,
    )
    net = model.build(cfg, wrap)
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(net.startup)  # under fleetrun it broadcasts rank 0's values
    data = criteo_reader.read_criteo(args.train, sparse_dim=args.sparse_dim)
    steps = len(data) // args.batch_size // nranks
    start = window = time.perf_counter()
    samples = step = 0
    for epoch in range(1, args.epochs + 1):
        batches = criteo_reader.iterate_batches(
            data, args.batch_size, shuffle=True, seed=args.seed + epoch
        )
        for i, batch in enumerate(batches):
            if i % nranks != rank or i // nranks >= steps:
                continue
            (loss,) = exe.run(
                net.main,
                feed=net.feed(batch.dense, batch.sparse, batch.label),
                fetch_list=[net.loss],
            )
            step += 1
            samples += len(batch) * nranks
            if step % args.print_period == 0 and rank == 0:
                now = time.perf_counter()
                rate = args.print_period * args.batch_size * nranks / (now - window)
                print(
                    f"epoch {epoch} step {step}: loss={loss[0]:.5f} {rate:.0f} samples/s",
                    flush=True,
                )
                window = now
    seconds = time.perf_counter() - start
    if rank == 0:
        test = criteo_reader.read_criteo([args.test], sparse_dim=args.sparse_dim)
        auc = baselines.roc_auc(test.label[:, 0], train.evaluate(exe, net, test))
        print(f"samples={samples} samples_per_sec={samples / seconds:.0f} ({nranks} rank(s))")
        print(f"test_auc={auc:.5f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
