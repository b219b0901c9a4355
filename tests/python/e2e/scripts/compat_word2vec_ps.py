"""A word2vec-style network ported from Paddle's nce example, as a parameter-server job: shared
is_sparse embeddings, nce with a sparse weight gradient, Adagrad with an exponential_decay rate
(the servers step the schedule). Prints the mean loss of the first and last ten steps."""

import argparse

import numpy as np

import fleet
from fleet import layers

VOCAB = 50


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="sync")
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    fleet.init()
    main_prog, startup = fleet.Program(), fleet.Program()
    main_prog.random_seed = startup.random_seed = 1
    with fleet.program_guard(main_prog, startup):
        words = [layers.data(f"word_{i}", [1], dtype="int64") for i in range(3)]
        embs = [
            layers.embedding(words[i], size=[VOCAB, 8], param_attr="embed", is_sparse=True)
            for i in (0, 2)
        ]
        cost = layers.nce(
            layers.concat(embs, axis=1), words[1], VOCAB, num_neg_samples=4, is_sparse=True
        )
        loss = layers.mean(cost)
        lr = layers.exponential_decay(0.3, decay_steps=100, decay_rate=0.5)
        strategy = {
            "sync": fleet.DistributedStrategyFactory.create_sync_strategy(),
            "async": fleet.DistributedStrategyFactory.create_async_strategy(),
        }[args.mode]
        fleet.distributed_optimizer(fleet.optimizer.Adagrad(lr), strategy).minimize(loss)
    if fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return 0
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(fleet.startup_program)
    fleet.init_worker()
    rng = np.random.default_rng(fleet.worker_index())
    losses = []
    for _ in range(args.steps):
        centre = rng.integers(0, VOCAB, size=(32, 1))
        feed = {"word_0": (centre - 1) % VOCAB, "word_1": centre, "word_2": (centre + 1) % VOCAB}
        (value,) = exe.run(fleet.main_program, feed=feed, fetch_list=[loss])
        losses.append(float(value.reshape(-1)[0]))
    print(f"first_loss={np.mean(losses[:10]):.4f} last_loss={np.mean(losses[-10:]):.4f}")
    fleet.stop_worker()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
