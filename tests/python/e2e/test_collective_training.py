"""Data-parallel training through the collective pass, with real ranks launched by fleetrun on
127.0.0.1 (Gloo on CPU): 2 ranks on batch B reach the parameters of one process on batch 2B (SGD,
Adam, a dense model and is_sparse embeddings both made dense and gathered), fused equals unfused,
gradient merge over k = 4 equals one step on 4x the batch, ranks start equal whatever their seeds;
and a rank that dies mid-step fails the others with a message naming it."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from tests.python.e2e import collective_cases as cc
from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(180)

ATOL = 1e-5


def run_cases(tmp_path, names, nproc=2):
    script = os.path.join(os.path.dirname(cc.__file__), "collective_cases.py")
    cmd = lh.launcher_command(
        ["--collective", f"--nproc_per_node={nproc}"], script, str(tmp_path), *names
    )
    proc = subprocess.run(
        cmd,
        env=lh.job_env(tmp_path, collective=True),
        cwd=lh.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return {
        name: [json.loads((tmp_path / f"{name}.{r}.json").read_text()) for r in range(nproc)]
        for name in names
    }


def check_equivalent(case, ranks):
    for r in range(1, len(ranks)):
        for name, value in ranks[0]["initial"].items():
            np.testing.assert_array_equal(
                np.asarray(ranks[r]["initial"][name]),
                value,
                err_msg=f"{case.name}: rank {r} starts apart on {name}",
            )
        for name, value in ranks[0]["final"].items():
            np.testing.assert_array_equal(
                np.asarray(ranks[r]["final"][name]),
                value,
                err_msg=f"{case.name}: rank {r} ends apart on {name}",
            )
    want = cc.reference(case, len(ranks), ranks[0]["initial"])
    moved = 0.0
    for name, value in want.items():
        got = np.asarray(ranks[0]["final"][name], np.float32)
        np.testing.assert_allclose(
            got,
            value,
            rtol=1e-5,
            atol=ATOL,
            err_msg=f"{case.name}: {name} differs from one process",
        )
        moved = max(moved, float(np.abs(value - np.asarray(ranks[0]["initial"][name])).max()))
    assert moved > 1e-3, f"{case.name}: training did not change the parameters"


def test_two_ranks_equal_one_process_on_twice_the_batch(tmp_path):
    names = list(cc.CASES)
    results = run_cases(tmp_path, names)
    for name in names:
        check_equivalent(cc.CASES[name], results[name])
    # The pass's choices show in the programs.
    prog = {name: results[name][0]["program"] for name in names}
    assert "c_broadcast" in results["dense_sgd"][0]["startup"]
    assert "c_allreduce_sum" in prog["dense_sgd"] and "c_allreduce_start" not in prog["dense_sgd"]
    assert prog["dense_adam_fused"].count("c_allreduce_start") >= 2  # several 1 KB buckets
    assert prog["dense_adam_fused"].count("c_allreduce_wait") >= 2
    assert "c_allgather_rows" not in prog["sparse_small_sgd"]  # the small table went dense
    assert "c_allgather_rows" in prog["sparse_large_adam"]
    assert "c_gradient_merge_acc" in prog["merge4_adam"] and "block 1" in prog["merge4_adam"]


def test_fused_and_unfused_allreduce_give_the_same_parameters(tmp_path):
    results = run_cases(tmp_path, ["dense_adam_fused", "dense_adam_unfused"])
    fused, unfused = (results[n][0]["final"] for n in ("dense_adam_fused", "dense_adam_unfused"))
    assert results["dense_adam_fused"][0]["initial"].keys() == fused.keys()
    for name in fused:
        # Same start (the cases share seeds and data), so only summation order may differ.
        np.testing.assert_allclose(
            np.asarray(fused[name]), np.asarray(unfused[name]), rtol=1e-6, atol=1e-6, err_msg=name
        )


def test_ranks_start_equal_whatever_their_seeds(tmp_path):
    results = run_cases(tmp_path, ["dense_sgd"])["dense_sgd"]
    # Without the broadcast, rank 1's seed would have given other values.
    main, startup, loss, opt = cc.build(cc.CASES["dense_sgd"])
    opt.minimize(loss, startup)
    import fleet
    from fleet import _core

    scope = _core.Scope()
    fleet.Executor(fleet.CPUPlace(), seed=7 + 1000, resources=_core.RuntimeResources()).run(
        startup, scope=scope
    )
    own = cc.params_of(main, scope)
    assert any(not np.array_equal(own[n], results[1]["initial"][n]) for n in own)
    for name, value in results[0]["initial"].items():
        np.testing.assert_array_equal(results[1]["initial"][name], value)


# What every rank script below starts with: the dense SGD case, minimized, started.
RANK_SETUP = """
import sys
import numpy as np
sys.path.insert(0, {repo!r})
from fleet import fleet_api
from tests.python.e2e import collective_cases as cc
fleet_api.init(is_collective=True)
import fleet
from fleet import _core
from fleet.base.distributed_optimizer import DistributedOptimizer
rank = fleet_api.worker_index()
case = cc.CASES["dense_sgd"]
main, startup, loss, opt = cc.build(case)
DistributedOptimizer(fleet_api.instance, opt, None).minimize(loss, startup)
exe = fleet.Executor(fleet.CPUPlace())
scope = _core.Scope()
exe.run(startup, scope=scope)
"""

DYING = (
    RANK_SETUP
    + """for step in range(1000):
    if rank == 1 and step == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # dies mid-job, between two allreduces
    feed = cc.feed_of(cc.global_batch(case, step, 2), rank * cc.BATCH, (rank + 1) * cc.BATCH)
    exe.run(main, feed=feed, scope=scope)
"""
)


def _rank_env(rank, endpoints, store):
    env = lh.job_env(
        lh.REPO_ROOT, collective=True, FLEET_GLOO_STORE_ENDPOINT=store, FLEET_GLOO_TIMEOUT_S="30"
    )
    env.update(
        PADDLE_TRAINER_ID=str(rank),
        PADDLE_TRAINERS_NUM=str(len(endpoints)),
        PADDLE_TRAINER_ENDPOINTS=",".join(endpoints),
        PADDLE_CURRENT_ENDPOINT=endpoints[rank],
        TRAINING_ROLE="TRAINER",
    )
    return env


def _start_ranks(script: pathlib.Path, text: str) -> tuple[list, list[str]]:
    """Writes `text` to `script` and starts it as ranks 0 and 1 of a collective job on free
    loopback ports (their Gloo store too), without fleetrun. (processes, rank endpoints)."""
    from fleet.launch.plan import free_ports

    ports = free_ports("127.0.0.1", 3)
    endpoints = [f"127.0.0.1:{p}" for p in ports[:2]]
    script.write_text(text)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script)],
            cwd=lh.REPO_ROOT,
            env=_rank_env(r, endpoints, f"127.0.0.1:{ports[2]}"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    return procs, endpoints


def test_a_rank_that_dies_mid_step_fails_the_others_naming_it(tmp_path):
    text = "import os, signal\n" + textwrap.dedent(DYING.format(repo=str(lh.REPO_ROOT)))
    procs, endpoints = _start_ranks(tmp_path / "dying.py", text)
    try:
        start = time.monotonic()
        out, err = procs[0].communicate(timeout=90)
        elapsed = time.monotonic() - start
        procs[1].communicate(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert procs[1].returncode == -signal.SIGKILL
    assert procs[0].returncode != 0
    assert "fleet.errors.Unavailable" in err, err[-3000:]
    assert f"rank(s) 1 ({endpoints[1]}) of 2 are gone" in err, err[-3000:]
    assert elapsed < 60


def test_fleetrun_ends_the_job_with_no_orphans_when_a_rank_dies(tmp_path):
    body = DYING.format(repo=str(lh.REPO_ROOT)).replace(
        "exe.run(startup, scope=scope)", "exe.run(startup, scope=scope)\nrecord('up', rank)"
    )
    result = lh.run_job(
        tmp_path, ["--collective", "--nproc_per_node=2"], body, timeout=120, collective=True
    )
    assert result.returncode != 0
    assert "worker.1" in result.stderr
    pids = lh.pids(tmp_path)
    assert sorted(pids) == ["worker.0", "worker.1"]
    assert lh.running(list(pids.values())) == []


UNEVEN = (
    RANK_SETUP
    + """
import json
# Rank r holds {{batches}}[r] batches of its own.
rng = np.random.RandomState(rank)
path = {out!r} + f"/part-{{rank}}"
with open(path, "w") as f:
    for _ in range({batches}[rank] * cc.BATCH):
        x = rng.randn(cc.FEATURES)
        values = " ".join(f"{{v:.6f}}" for v in x)
        f.write(f"{{cc.FEATURES}} {{values}} 1 {{rng.randint(2)}}\\n")
block = main.global_block()
dataset = fleet.DatasetFactory().create_dataset("QueueDataset")
dataset.set_use_var([block.var("x"), block.var("label")])
dataset.set_batch_size(cc.BATCH)
dataset.set_filelist([path])
for epoch in range(2):  # the second pass starts even again
    result = exe.train_from_dataset(main, dataset, scope=scope, thread=1, print_period=0)
    print(json.dumps({{"rank": rank, "epoch": epoch, "batches": result.batches}}), flush=True)
print(json.dumps({{"rank": rank, "params": cc.params_of(main, scope)}}), flush=True)
"""
)


def test_ranks_with_uneven_data_run_the_same_steps_and_end_equal(tmp_path):
    body = UNEVEN.format(repo=str(lh.REPO_ROOT), out=str(tmp_path), batches=[3, 5])
    procs, _ = _start_ranks(tmp_path / "uneven.py", textwrap.dedent(body))
    try:
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, out[-2000:] + err[-3000:]
    records = [
        [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        for out, _ in outputs
    ]
    # Rank 0 has 3 batches, rank 1 has 5: both ran 3 steps in each pass, and rank 1 says why.
    for rank_records in records:
        assert [r["batches"] for r in rank_records[:2]] == [3, 3]
    assert "1 of 2 ranks ran out of data after 3 steps" in outputs[1][1], outputs[1][1][-2000:]
    params = [rank_records[2]["params"] for rank_records in records]
    for name, value in params[0].items():
        np.testing.assert_array_equal(np.asarray(params[1][name]), np.asarray(value), err_msg=name)
