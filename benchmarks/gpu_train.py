"""Benchmark: training on one GPU, Fleet's CUDA executor against PyTorch eager with the same
model, batch, optimizer and data, in the same process.

    PYTHONPATH=. python3 benchmarks/gpu_train.py [--quick] [--rounds N]

Models (float32, no TF32 on either side):
  mlp      the collective MLP of benchmarks/collective_train.py: 4 fc layers of 1024 with ReLU,
           a 1-unit head, sigmoid cross entropy, SGD(0.01); batch 256 and 4096.
  ctr_dnn  CTR-DNN as examples/ctr_dnn/model.py lays it out "fused": 26 ids per sample looked up
           in one 1,000,001 x 10 table with sparse (rows) gradients, 13 dense features, fc
           400-400-400 ReLU, a 2-way softmax with cross entropy, lazy Adam(1e-3) (torch:
           sparse Embedding with SparseAdam, Adam for the rest); batch 2048. The AUC op is left
           out of the timed step on both sides.
Each step feeds host batches, rotating over 8 pre-drawn ones (Fleet: LoDTensors in host memory;
torch: pinned tensors), and a round
ends by reading the loss on the host (one synchronisation per round, as a training loop that
logs every so often). The two sides alternate which goes first over --rounds rounds; every
round's steps/s is printed, and the ratios use the medians.

Figures (the last line of output is one JSON object):
  mlp_vs_torch        Fleet steps/s / torch steps/s per batch size, and their minimum (target
                      >= 1.0: a static graph with no Python in the step should not lose to eager).
  ctr_dnn_vs_torch    the same for CTR-DNN.
  mlp_vs_torch_data_on_device  the MLP ratio with the batch already on the device on both
                      sides (no host-to-device copy in the step).
  gemm_bound_fraction per MLP batch: the time cuBLAS alone takes for the step's GEMMs (the same
                      shapes and transposes, timed with CUDA events through torch.matmul), over
                      Fleet's step time: 1.0 would be a step that is nothing but its GEMMs.
Without a GPU (or without torch) the JSON says why it skipped.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

LAYERS, WIDTH = 4, 1024
MLP_BATCHES = (256, 4096)
CTR_BATCH, SPARSE_DIM, EMB_DIM, NUM_SPARSE, NUM_DENSE = 2048, 1_000_001, 10, 26, 13
CTR_HIDDEN = (400, 400, 400)
NUM_FEEDS = 8


def skip(reason: str) -> None:
    print(json.dumps({"skipped": reason}))
    sys.exit(0)


# ---- Fleet side -------------------------------------------------------------------------


def fleet_mlp(fleet: Any, batch: int) -> Callable[[dict], float]:
    from fleet import layers

    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = layers.data("x", [WIDTH], dtype="float32")
        label = layers.data("label", [1], dtype="float32")
        h = x
        for _ in range(LAYERS):
            h = layers.fc(h, WIDTH, act="relu")
        loss = layers.mean(layers.sigmoid_cross_entropy_with_logits(layers.fc(h, 1), label))
        fleet.optimizer.SGD(0.01).minimize(loss)
    return _fleet_runner(fleet, main, startup, loss)


def fleet_ctr(fleet: Any) -> Callable[[dict], float]:
    from fleet import layers

    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        ids = layers.data("sparse", [NUM_SPARSE], dtype="int64")
        dense = layers.data("dense", [NUM_DENSE], dtype="float32")
        label = layers.data("label", [1], dtype="int64")
        emb = layers.embedding(ids, [SPARSE_DIM, EMB_DIM], is_sparse=True)
        x = layers.concat([layers.reshape(emb, [-1, NUM_SPARSE * EMB_DIM]), dense], axis=1)
        for width in CTR_HIDDEN:
            x = layers.fc(x, width, act="relu")
        logits = layers.fc(x, 2)
        loss = layers.mean(layers.softmax_with_cross_entropy(logits, label))
        fleet.optimizer.Adam(1e-3, lazy_mode=True).minimize(loss)
    return _fleet_runner(fleet, main, startup, loss)


def _fleet_runner(fleet: Any, main: Any, startup: Any, loss: Any) -> Callable[[list, int], float]:
    from fleet import _core

    exe = fleet.Executor(fleet.CUDAPlace(0))
    scope = _core.Scope()
    exe.run(startup, scope=scope)

    def run(feeds: list[dict], steps: int) -> float:
        for i in range(steps - 1):
            exe.run(main, feed=feeds[i % len(feeds)], scope=scope)
        (value,) = exe.run(
            main, feed=feeds[(steps - 1) % len(feeds)], fetch_list=[loss], scope=scope
        )
        return float(np.asarray(value).reshape(-1)[0])

    return run


# ---- torch side -------------------------------------------------------------------------


def torch_mlp(torch: Any) -> Callable[[list, int], float]:
    nn = torch.nn
    layers: list[Any] = []
    for _ in range(LAYERS):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(WIDTH, 1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.BCEWithLogitsLoss()

    def step(batch: dict) -> Any:
        x = batch["x"].cuda(non_blocking=True)
        y = batch["label"].cuda(non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return _torch_runner(step)


def torch_ctr(torch: Any) -> Callable[[list, int], float]:
    nn = torch.nn
    emb = nn.Embedding(SPARSE_DIM, EMB_DIM, sparse=True).cuda()
    widths = (NUM_SPARSE * EMB_DIM + NUM_DENSE,) + CTR_HIDDEN
    layers: list[Any] = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    mlp = nn.Sequential(*layers, nn.Linear(widths[-1], 2)).cuda()
    sparse_opt = torch.optim.SparseAdam(emb.parameters(), lr=1e-3)
    dense_opt = torch.optim.Adam(mlp.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step(batch: dict) -> Any:
        ids = batch["sparse"].cuda(non_blocking=True)
        dense = batch["dense"].cuda(non_blocking=True)
        label = batch["label"].cuda(non_blocking=True).view(-1)
        sparse_opt.zero_grad(set_to_none=True)
        dense_opt.zero_grad(set_to_none=True)
        x = torch.cat([emb(ids).view(ids.shape[0], -1), dense], dim=1)
        loss = loss_fn(mlp(x), label)
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
        return loss

    return _torch_runner(step)


def _torch_runner(step: Callable[[dict], Any]) -> Callable[[list, int], float]:
    def run(feeds: list[dict], steps: int) -> float:
        loss = None
        for i in range(steps):
            loss = step(feeds[i % len(feeds)])
        return float(loss.item())  # the one synchronisation of the round

    return run


# ---- data, timing -----------------------------------------------------------------------


def mlp_feeds(rng: np.random.Generator, batch: int) -> list[dict]:
    return [
        {
            "x": rng.standard_normal((batch, WIDTH)).astype(np.float32),
            "label": (rng.random((batch, 1)) > 0.5).astype(np.float32),
        }
        for _ in range(NUM_FEEDS)
    ]


def ctr_feeds(rng: np.random.Generator) -> list[dict]:
    feeds = []
    for _ in range(NUM_FEEDS):
        # Power-law ids, as click logs have: many repeats within a batch.
        ids = (rng.pareto(1.1, size=(CTR_BATCH, NUM_SPARSE)) * 1000).astype(np.int64) % SPARSE_DIM
        feeds.append(
            {
                "sparse": ids,
                "dense": rng.random((CTR_BATCH, NUM_DENSE)).astype(np.float32),
                "label": (rng.random((CTR_BATCH, 1)) > 0.7).astype(np.int64),
            }
        )
    return feeds


def pinned(torch: Any, feeds: list[dict]) -> list[dict]:
    """torch's batches: pinned host tensors, copied to the device with non_blocking=True."""
    return [{k: torch.from_numpy(v).pin_memory() for k, v in f.items()} for f in feeds]


def host_tensors(fleet: Any, feeds: list[dict]) -> list[dict]:
    """Fleet's batches: host LoDTensors (fed as they are; the executor copies them to the
    device through its pinned staging buffers)."""
    return [{k: fleet.LoDTensor(v) for k, v in f.items()} for f in feeds]


def compare(
    name: str,
    fleet_run: Callable,
    torch_run: Callable,
    feeds: list,
    tfeeds: list,
    steps: int,
    rounds: int,
    warmup: int,
) -> dict:
    fleet_run(feeds, warmup)
    torch_run(tfeeds, warmup)
    fleet_rates, torch_rates, fleet_loss, torch_loss = [], [], 0.0, 0.0
    for r in range(rounds):
        order = [("fleet", fleet_run, feeds), ("torch", torch_run, tfeeds)]
        if r % 2:
            order.reverse()
        for side, run, data in order:
            start = time.perf_counter()
            loss = run(data, steps)
            rate = steps / (time.perf_counter() - start)
            if side == "fleet":
                fleet_rates.append(rate)
                fleet_loss = loss
            else:
                torch_rates.append(rate)
                torch_loss = loss
        print(
            f"{name} round {r}: fleet {fleet_rates[-1]:.1f} steps/s, torch "
            f"{torch_rates[-1]:.1f} steps/s",
            flush=True,
        )
    fleet_med, torch_med = statistics.median(fleet_rates), statistics.median(torch_rates)
    return {
        "fleet_steps_per_s": round(fleet_med, 2),
        "torch_steps_per_s": round(torch_med, 2),
        "ratio": round(fleet_med / torch_med, 3),
        "fleet_rounds": [round(v, 2) for v in fleet_rates],
        "torch_rounds": [round(v, 2) for v in torch_rates],
        "last_loss": {"fleet": round(fleet_loss, 5), "torch": round(torch_loss, 5)},
    }


def gemm_seconds_per_step(torch: Any, batch: int, repeats: int) -> float:
    """cuBLAS alone on the MLP step's GEMMs: forward X W for each layer, and backward dX = dY W^T
    (not for the first layer, whose input needs no gradient) and dW = X^T dY."""
    dev = "cuda"
    shapes = [(WIDTH, WIDTH)] * LAYERS + [(WIDTH, 1)]
    x = torch.randn(batch, WIDTH, device=dev)
    work = []
    for i, (k, n) in enumerate(shapes):
        w = torch.randn(k, n, device=dev)
        y = torch.randn(batch, n, device=dev)
        work.append(lambda x=x, w=w: torch.matmul(x, w))
        if i > 0:
            work.append(lambda y=y, w=w: torch.matmul(y, w.t()))
        work.append(lambda x=x, y=y: torch.matmul(x.t(), y))
    for fn in work:
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        for fn in work:
            fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000.0 / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few steps: checks that it runs")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import fleet
    from fleet import _core

    if not _core.compiled_with_cuda:
        skip("Fleet was built without CUDA")
    if _core.cuda_device_count() == 0:
        skip("no CUDA device visible")
    try:
        import torch
    except ImportError:
        skip("PyTorch is not installed")
    if not torch.cuda.is_available():
        skip("PyTorch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    rounds = 2 if args.quick else args.rounds
    rng = np.random.default_rng(0)
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "precision": "float32 (no TF32) on both sides",
        "rounds": rounds,
    }
    mlp: dict[str, Any] = {}
    gemm: dict[str, float] = {}
    resident: dict[str, Any] = {}
    for batch in MLP_BATCHES:
        steps = 5 if args.quick else (100 if batch <= 256 else 30)
        feeds = mlp_feeds(rng, batch)
        fleet_run, torch_run = fleet_mlp(fleet, batch), torch_mlp(torch)
        mlp[str(batch)] = compare(
            f"mlp batch {batch}",
            fleet_run,
            torch_run,
            host_tensors(fleet, feeds),
            pinned(torch, feeds),
            steps,
            rounds,
            warmup=3,
        )
        gemm_s = gemm_seconds_per_step(torch, batch, 3 if args.quick else 20)
        fleet_step_s = 1.0 / mlp[str(batch)]["fleet_steps_per_s"]
        mlp[str(batch)]["gemm_ms_per_step"] = round(gemm_s * 1e3, 4)
        gemm[str(batch)] = round(gemm_s / fleet_step_s, 3)
        # The same steps with the batch already on the device (Fleet: the fed variables keep
        # the last batch; torch: device tensors): what the step costs without moving data.
        device_feeds = [{k: v.cuda() for k, v in f.items()} for f in pinned(torch, feeds[:1])]
        resident[str(batch)] = compare(
            f"mlp batch {batch}, data on the device",
            fleet_run,
            torch_run,
            [{}],
            device_feeds,
            steps,
            rounds,
            warmup=1,
        )["ratio"]
    feeds = ctr_feeds(rng)
    ctr = compare(
        "ctr_dnn",
        fleet_ctr(fleet),
        torch_ctr(torch),
        host_tensors(fleet, feeds),
        pinned(torch, feeds),
        5 if args.quick else 50,
        rounds,
        warmup=3,
    )
    result.update(
        {
            "mlp": mlp,
            "ctr_dnn": ctr,
            "mlp_vs_torch": min(v["ratio"] for v in mlp.values()),
            "mlp_vs_torch_by_batch": {k: v["ratio"] for k, v in mlp.items()},
            "mlp_vs_torch_data_on_device": resident,
            "ctr_dnn_vs_torch": ctr["ratio"],
            "gemm_bound_fraction": gemm,
            "nccl": "not exercised (one GPU, no collective step in this benchmark)",
        }
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
