"""fleet.init() under Slurm (srun), Open MPI (mpirun) and Kubeflow's PaddleJob, without fleetrun
(issue 30): each test replays the environment the manager gives each task or pod, as separate
processes, each "node" or pod a loopback address of its own, and the job trains (collective and
parameter server). The variables are the managers' own (Slurm's srun "OUTPUT ENVIRONMENT
VARIABLES", Open MPI's mpirun "Environment variables" section, the training operator's
envvar.go); fleet.cluster_env and fleet.paddlejob_env read them."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.python.e2e import collective_cases as cc
from tests.python.e2e import launch_helpers as lh
from tests.python.e2e import multi_host as mh

pytestmark = pytest.mark.timeout(240)

LR, STEPS = 0.5, 10
TASK_TIMEOUT_S = 180

COLLECTIVE_TRAIN = """
from tests.python.e2e import collective_cases as cc
record("where", [fleet.worker_index(), fleet.worker_endpoints()[fleet.worker_index()]])
cc.run_rank(cc.CASES["dense_sgd"], str(JOB_DIR))
"""

# The sync "w" model (w_model.py): after STEPS steps every worker's w is -LR * STEPS exactly.
PS_TRAIN = f"""
from tests.python.e2e.w_model import start
record("where", [ME, fleet.server_endpoints()[fleet.server_index()] if fleet.is_server()
                   else fleet.worker_endpoints()[fleet.worker_index()]])
worker = start({LR})
for step in range({STEPS}):
    worker.step()
record("w", worker.w())
fleet.stop_worker()
"""


def _start_task(job_dir, script, task: dict, log, collective: bool) -> subprocess.Popen:
    """One task or pod: a process with the manager's variables, as srun/mpirun/kubelet start it."""
    with open(log, "a") as out:
        return subprocess.Popen(
            [sys.executable, "-u", str(script)],
            env=lh.job_env(job_dir, collective, **task),
            cwd=lh.REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _run_tasks(job_dir, body: str, task_envs: list[dict], collective: bool, during=None) -> None:
    """Starts one process per task with the manager's variables, as srun/mpirun would, and
    waits for all; every one must succeed (the first to fail stops the others, and the
    assertion shows its output). `during(procs, start)`, when given, runs once they started:
    it may replace a process of `procs` by one `start(rank)` started again."""
    script = lh.write_script(job_dir, body)
    logs = [job_dir / f"task.{rank}.log" for rank in range(len(task_envs))]
    procs = [_start_task(job_dir, script, t, log, collective) for t, log in zip(task_envs, logs)]

    def start(rank: int) -> subprocess.Popen:
        return _start_task(job_dir, script, task_envs[rank], logs[rank], collective)

    deadline = time.monotonic() + TASK_TIMEOUT_S
    try:
        if during is not None:
            during(procs, start)
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            failed = [r for r, p in enumerate(procs) if p.poll() not in (None, 0)]
            assert not failed, f"task {failed[0]} failed:\n{logs[failed[0]].read_text()[-3000:]}"
            time.sleep(0.1)
        late = [r for r, p in enumerate(procs) if p.poll() is None]
        assert not late, f"tasks {late} still run after {TASK_TIMEOUT_S} s:\n" + "\n".join(
            logs[r].read_text()[-1500:] for r in late
        )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        lh.kill_leftovers(job_dir)
    for rank, proc in enumerate(procs):
        assert proc.returncode == 0, f"task {rank}:\n{logs[rank].read_text()[-3000:]}"


def _slurm_tasks(nodelist: str, tasks_per_node: list[int], **common: str) -> list[dict]:
    """What srun gives task r of a block distribution over the nodes."""
    tasks, rank = [], 0
    compressed = ",".join(f"{k}(x1)" for k in tasks_per_node)
    nodes = len(tasks_per_node)
    for node, count in enumerate(tasks_per_node):
        for local in range(count):
            tasks.append(
                dict(
                    common,
                    SLURM_JOB_ID="4242",
                    SLURM_JOB_NODELIST=nodelist,
                    SLURM_JOB_NUM_NODES=str(nodes),
                    SLURM_NNODES=str(nodes),
                    SLURM_NTASKS=str(sum(tasks_per_node)),
                    SLURM_NPROCS=str(sum(tasks_per_node)),
                    SLURM_TASKS_PER_NODE=compressed,
                    SLURM_STEP_NODELIST=nodelist,
                    SLURM_STEP_NUM_NODES=str(nodes),
                    SLURM_STEP_NUM_TASKS=str(sum(tasks_per_node)),
                    SLURM_STEP_TASKS_PER_NODE=compressed,
                    SLURM_PROCID=str(rank),
                    SLURM_LOCALID=str(local),
                    SLURM_NODEID=str(node),
                )
            )
            rank += 1
    return tasks


def _ompi_tasks(size: int, per_host: int, **common: str) -> list[dict]:
    """What mpirun (mapping by slot) gives rank r."""
    return [
        dict(
            common,
            OMPI_COMM_WORLD_RANK=str(r),
            OMPI_COMM_WORLD_SIZE=str(size),
            OMPI_COMM_WORLD_LOCAL_RANK=str(r % per_host),
            OMPI_COMM_WORLD_LOCAL_SIZE=str(per_host),
            OMPI_COMM_WORLD_NODE_RANK=str(r // per_host),
            OMPI_UNIVERSE_SIZE=str(size),
        )
        for r in range(size)
    ]


def _check_collective(job_dir, hosts_of_rank: list[str]) -> None:
    where = lh.recorded(job_dir, "where")
    assert {name: (v[0], v[1].rpartition(":")[0]) for name, v in where.items()} == {
        f"worker.{r}": (r, host) for r, host in enumerate(hosts_of_rank)
    }
    ranks = [json.loads((job_dir / f"dense_sgd.{r}.json").read_text()) for r in range(4)]
    expected = cc.reference(cc.CASES["dense_sgd"], 4, ranks[0]["initial"])
    for rank in ranks:
        for name, value in expected.items():
            np.testing.assert_allclose(rank["final"][name], value, rtol=1e-4, atol=1e-5)


def _check_ps(job_dir, host_of: dict[str, str]) -> None:
    assert {
        n: (v[0], v[1].rpartition(":")[0]) for n, v in lh.recorded(job_dir, "where").items()
    } == {n: (n, h) for n, h in host_of.items()}
    assert lh.recorded(job_dir, "w") == {"worker.0": -LR * STEPS, "worker.1": -LR * STEPS}


def test_srun_collective_two_nodes_two_tasks_each(tmp_path):
    hosts = ["127.0.0.2", "127.0.0.3"]
    port = mh.common_free_port(hosts, 3)
    tasks = _slurm_tasks("127.0.0.[2-3]", [2, 2], FLEET_PORT=str(port))
    _run_tasks(tmp_path, COLLECTIVE_TRAIN, tasks, collective=True)
    _check_collective(tmp_path, ["127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"])


def test_srun_ps_servers_on_two_nodes_workers_on_a_third(tmp_path):
    hosts = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    port = mh.common_free_port(hosts, 3)
    tasks = _slurm_tasks("127.0.0.[2-4]", [1, 1, 2], FLEET_PORT=str(port), FLEET_SERVER_NUM="2")
    _run_tasks(tmp_path, PS_TRAIN, tasks, collective=False)
    _check_ps(
        tmp_path,
        {
            "server.0": "127.0.0.2",
            "server.1": "127.0.0.3",
            "worker.0": "127.0.0.4",
            "worker.1": "127.0.0.4",
        },
    )


def test_mpirun_collective_two_hosts_two_ranks_each(tmp_path):
    hosts = ["127.0.0.2", "127.0.0.3"]
    port = mh.common_free_port(hosts, 3)
    tasks = _ompi_tasks(4, 2, FLEET_HOSTS=",".join(hosts), FLEET_PORT=str(port))
    _run_tasks(tmp_path, COLLECTIVE_TRAIN, tasks, collective=True)
    _check_collective(tmp_path, ["127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"])


def test_mpirun_ps_servers_on_one_host_workers_on_another(tmp_path):
    hosts = ["127.0.0.2", "127.0.0.3"]
    port = mh.common_free_port(hosts, 3)
    tasks = _ompi_tasks(
        4, 2, FLEET_HOSTS=",".join(hosts), FLEET_PORT=str(port), FLEET_SERVER_NUM="2"
    )
    _run_tasks(tmp_path, PS_TRAIN, tasks, collective=False)
    _check_ps(
        tmp_path,
        {
            "server.0": "127.0.0.2",
            "server.1": "127.0.0.2",
            "worker.0": "127.0.0.3",
            "worker.1": "127.0.0.3",
        },
    )


def _paddlejob_pods(job: str, masters: list[str], workers: list[str], port: int, **common):
    """What the Kubeflow training operator gives each pod of a PaddleJob (envvar.go), plus the
    POD_IP our manifests add from status.podIP. Each pod is one address. The master's service
    name (<job>-master-0 / <job>-worker-0) stands resolved to that pod's address: this machine
    has no cluster DNS."""
    ps = bool(masters)
    rendezvous_at = (masters or workers)[0]
    pods = []
    for kind, addresses in (("master", masters), ("worker", workers)):
        for index, address in enumerate(addresses):
            env = dict(
                common,
                PYTHONUNBUFFERED="0",
                PADDLE_JOB_ID=job,
                PADDLE_NNODES=str(len(masters) + len(workers)),
                POD_IP=address,
            )
            if address == rendezvous_at:  # rank 0 of the master's replica type
                env.update(POD_IP_DUMMY=address, PADDLE_MASTER=f"{address}:{port}")
            else:
                env["PADDLE_MASTER"] = f"{rendezvous_at}:{port}"
            if ps:
                env["PADDLE_SERVER_NUM" if kind == "master" else "PADDLE_TRAINER_NUM"] = "1"
            pods.append(env)
    return pods


def test_paddlejob_collective_four_worker_pods(tmp_path):
    pods = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
    master = mh.common_free_port(pods, 3)  # the rendezvous; FLEET_PORT and the store after it
    port = master + 1
    tasks = _paddlejob_pods("train-ctr", [], pods, master, FLEET_PORT=str(port))
    _run_tasks(tmp_path, COLLECTIVE_TRAIN, tasks, collective=True)
    # Worker 0 is the master pod; the others take the next indices in the order they joined.
    where = {n: v[1].rpartition(":")[0] for n, v in lh.recorded(tmp_path, "where").items()}
    assert where["worker.0"] == pods[0] and sorted(where.values()) == pods
    ranks = [json.loads((tmp_path / f"dense_sgd.{r}.json").read_text()) for r in range(4)]
    expected = cc.reference(cc.CASES["dense_sgd"], 4, ranks[0]["initial"])
    for rank in ranks:
        for name, value in expected.items():
            np.testing.assert_allclose(rank["final"][name], value, rtol=1e-4, atol=1e-5)


def test_paddlejob_ps_two_master_pods_serve_two_worker_pods_train(tmp_path):
    masters, workers = ["127.0.0.2", "127.0.0.3"], ["127.0.0.4", "127.0.0.5"]
    master, port = (
        mh.common_free_port(masters + workers, 1),
        mh.common_free_port(masters + workers, 2),
    )
    tasks = _paddlejob_pods("train-ps", masters, workers, master, FLEET_PORT=str(port))
    _run_tasks(tmp_path, PS_TRAIN, tasks, collective=False)
    where = {n: v[1].rpartition(":")[0] for n, v in lh.recorded(tmp_path, "where").items()}
    assert where["server.0"] == masters[0] and where["server.1"] == masters[1]
    assert sorted([where["worker.0"], where["worker.1"]]) == workers
    assert lh.recorded(tmp_path, "w") == {"worker.0": -LR * STEPS, "worker.1": -LR * STEPS}


# The PS job of PS_TRAIN for restarts: it takes restarted servers, every pod's environment names
# the checkpoint (a pod restarted in place gets the environment of its first start), worker 0
# saves it after step SAVE_AT, and both workers pause there until the test says "go".
SAVE_AT = 4
PS_RESTARTED = PS_TRAIN.replace(
    f"start({LR})", f'start({LR}, {{"server_restarts": True, "rpc_timeout_s": 90}})'
).replace(
    "    worker.step()",
    f"""    worker.step()
    if step == {SAVE_AT}:
        fleet.save_persistables(worker.exe, os.environ["FLEET_RESTART_CHECKPOINT"])
        record("paused", True)
        while not (JOB_DIR / "go").exists():
            time.sleep(0.05)""",
)


def test_paddlejob_ps_server_pod_restarted_in_place_reloads_its_shard(tmp_path):
    """Server 1's pod (not the master's, whose process holds the rendezvous) is SIGKILLed after
    worker 0's save at step SAVE_AT and started again with the same environment, as kubelet
    restarts a container: it takes its place at the rendezvous again, reloads its shard, and
    the workers end at w = -LR * STEPS, where an uninterrupted job ends (the steps after the
    save are the reloaded server's; from an empty shard w would differ)."""
    masters, workers = ["127.0.0.2", "127.0.0.3"], ["127.0.0.4", "127.0.0.5"]
    master, port = (
        mh.common_free_port(masters + workers, 1),
        mh.common_free_port(masters + workers, 2),
    )
    checkpoint = tmp_path / "checkpoint"
    tasks = _paddlejob_pods(
        "train-ps-restart",
        masters,
        workers,
        master,
        FLEET_PORT=str(port),
        FLEET_RESTART_CHECKPOINT=str(checkpoint),
    )

    def kill_and_restart_server_1(procs, start):
        lh.wait_for_records(tmp_path, "paused", 2, [])
        server_1 = next(r for r, t in enumerate(tasks) if t["POD_IP"] == masters[1])
        procs[server_1].kill()
        procs[server_1].wait()
        procs[server_1] = start(server_1)
        (tmp_path / "go").write_text("")

    _run_tasks(tmp_path, PS_RESTARTED, tasks, collective=False, during=kill_and_restart_server_1)
    assert lh.recorded(tmp_path, "w") == {"worker.0": -LR * STEPS, "worker.1": -LR * STEPS}
    # Its first start found no complete save in the checkpoint its environment names and
    # started empty; its restart reloaded it, and the workers said they took it.
    server_log = (tmp_path / "task.1.log").read_text()
    reloading = f"server 1: restarted under the job; reloading its tables from {checkpoint}"
    assert server_log.count(reloading) == 1, server_log[-3000:]
    for rank in (2, 3):
        said = (tmp_path / f"task.{rank}.log").read_text()
        assert "parameter server 1 restarted under the running job" in said, said[-3000:]
        assert f"reloaded its tables from checkpoint {checkpoint}" in said, said[-3000:]


# The PS job of PS_TRAIN for worker restarts: the servers wait for a worker that died instead of
# failing the job, and each worker keeps its own checkpoint, its data position (the next step),
# written after step SAVE_AT, where both workers pause until the test says "go". A worker
# started again resumes from there.
PS_WORKER_RESTARTED = (
    PS_TRAIN.replace(f"start({LR})", f'start({LR}, {{"worker_restarts": True}})')
    .replace(
        f"for step in range({STEPS}):",
        f"""position = JOB_DIR / f"position.{{ME}}"
first = int(position.read_text()) if position.exists() else 0
for step in range(first, {STEPS}):""",
    )
    .replace(
        "    worker.step()",
        f"""    worker.step()
    if step == {SAVE_AT}:
        position.write_text(str(step + 1))
        record("paused", True)
        while not (JOB_DIR / "go").exists():
            time.sleep(0.05)""",
    )
)


def test_paddlejob_ps_worker_pod_restarted_in_place_rejoins_the_job(tmp_path):
    """Worker 1's pod is SIGKILLed at its checkpoint and started again with the same
    environment, as kubelet restarts a container, while worker 0 goes on into the next step: the
    servers wait for worker 1 instead of failing the job, it takes its place at the rendezvous
    and its id again, passes init_worker, pulls the current w and trains from its checkpoint.
    The sync job ends where an uninterrupted one does: w = -LR * STEPS on both workers."""
    masters, workers = ["127.0.0.2", "127.0.0.3"], ["127.0.0.4", "127.0.0.5"]
    master, port = (
        mh.common_free_port(masters + workers, 1),
        mh.common_free_port(masters + workers, 2),
    )
    tasks = _paddlejob_pods(
        "train-ps-worker-restart", masters, workers, master, FLEET_PORT=str(port)
    )
    restarted = {}

    def kill_and_restart_worker_1(procs, start):
        lh.wait_for_records(tmp_path, "paused", 2, [])
        host = lh.recorded(tmp_path, "where")["worker.1"][1].rpartition(":")[0]
        rank = next(r for r, t in enumerate(tasks) if t["POD_IP"] == host)
        procs[rank].kill()
        procs[rank].wait()
        (tmp_path / "go").write_text("")  # worker 0 steps on and waits for worker 1
        procs[rank] = start(rank)
        restarted["rank"] = rank

    _run_tasks(
        tmp_path, PS_WORKER_RESTARTED, tasks, collective=False, during=kill_and_restart_worker_1
    )
    assert lh.recorded(tmp_path, "w") == {"worker.0": -LR * STEPS, "worker.1": -LR * STEPS}
    servers_said = (tmp_path / "task.0.log").read_text() + (tmp_path / "task.1.log").read_text()
    assert servers_said.count("worker 1 is away: its connection from") == 2, servers_said[-3000:]
    assert servers_said.count("worker 1 is back (from") == 2, servers_said[-3000:]
    worker_1 = (tmp_path / f"task.{restarted['rank']}.log").read_text()
    assert "Traceback" not in worker_1, worker_1[-3000:]
