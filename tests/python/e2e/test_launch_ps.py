"""fleetrun in parameter-server mode: real server and worker processes on 127.0.0.1."""

from __future__ import annotations

import subprocess

import pytest

from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(120)

ROLES = """
record("role", dict(
    is_server=fleet.is_server(), is_worker=fleet.is_worker(),
    is_first_worker=fleet.is_first_worker(), worker_num=fleet.worker_num(),
    server_num=fleet.server_num(), server_endpoints=fleet.server_endpoints(),
    worker_endpoints=fleet.worker_endpoints(),
    index=fleet.server_index() if fleet.is_server() else fleet.worker_index(),
    own=f"{os.environ['POD_IP']}:{os.environ['PADDLE_PORT']}"))
print(f"hello from {ME}", flush=True)
if fleet.is_server():
    serve_until_stopped()
wait_for_records("role", 4)
"""


def test_roles_and_indices_match_and_servers_stop_after_workers(tmp_path):
    result = lh.run_job(tmp_path, ["--server_num=2", "--worker_num=2"], ROLES)
    assert result.returncode == 0, result.stderr
    roles = lh.recorded(tmp_path, "role")
    assert sorted(roles) == ["server.0", "server.1", "worker.0", "worker.1"]
    servers = roles["server.0"]["server_endpoints"]
    workers = roles["worker.0"]["worker_endpoints"]
    assert len(servers) == 2 and len(workers) == 2
    assert len(set(servers + workers)) == 4
    for name, seen in roles.items():
        role, index = name.split(".")
        assert seen["index"] == int(index)
        assert seen["is_server"] == (role == "server")
        assert seen["is_worker"] == (role == "worker")
        assert seen["is_first_worker"] == (name == "worker.0")
        assert (seen["worker_num"], seen["server_num"]) == (2, 2)
        assert seen["server_endpoints"] == servers and seen["worker_endpoints"] == workers
        # Each process's own endpoint is its entry of the list for its role.
        assert seen["own"] == (servers if role == "server" else workers)[int(index)]
    assert "all 2 workers finished; stopping 2 servers" in result.stderr
    # Without --log_dir every line reaches the console prefixed with role and rank.
    for name in roles:
        assert f"[{name}] hello from {name}" in result.stdout
    assert lh.running(list(lh.pids(tmp_path).values()), settle_s=0.5) == []


def test_all_reduce_all_gather_and_barrier_across_two_workers(tmp_path):
    body = """
    if fleet.is_server():
        serve_until_stopped()
    r = fleet.worker_index()
    out = {}
    for dtype in ("float32", "float64", "int32", "int64"):
        x = np.array([r + 1, 10 * (r + 1), -r], dtype=dtype)
        out[dtype] = {m: fleet.util.all_reduce(x, mode=m).tolist() for m in ("sum", "max", "min")}
        out[dtype + "_dtype"] = str(fleet.util.all_reduce(x).dtype)
    out["big"] = float(fleet.util.all_reduce(np.full(300_000, r + 1, np.float32)).sum())
    out["gather_obj"] = fleet.util.all_gather({"rank": r, "name": ME})
    out["gather_arr"] = [a.tolist() for a in fleet.util.all_gather(np.arange(3) + r)]
    out["gather_ragged"] = [a.tolist() for a in fleet.util.all_gather(np.arange(r + 1))]
    fleet.util.barrier()
    fleet.barrier_worker()
    record("util", out)
    """
    result = lh.run_job(tmp_path, ["--server_num=1", "--worker_num=2"], body)
    assert result.returncode == 0, result.stderr
    seen = lh.recorded(tmp_path, "util")
    assert sorted(seen) == ["worker.0", "worker.1"]
    for out in seen.values():
        for dtype in ("float32", "float64", "int32", "int64"):
            assert out[dtype] == {"sum": [3, 30, -1], "max": [2, 20, 0], "min": [1, 10, -1]}
            assert out[dtype + "_dtype"] == dtype
        assert out["big"] == 3.0 * 300_000
        assert out["gather_obj"] == [
            {"rank": 0, "name": "worker.0"},
            {"rank": 1, "name": "worker.1"},
        ]
        assert out["gather_arr"] == [[0, 1, 2], [1, 2, 3]]
        assert out["gather_ragged"] == [[0], [0, 1]]


def test_log_dir_holds_each_process_output(tmp_path):
    log_dir = tmp_path / "logs"
    body = """
    print(f"hello from {ME}", flush=True)
    print(f"stderr of {ME}", file=sys.stderr, flush=True)
    if fleet.is_server():
        record("printed", True)
        serve_until_stopped()
    wait_for_records("printed", 2)  # both servers printed their lines
    """
    result = lh.run_job(
        tmp_path, ["--server_num=2", "--worker_num=2", f"--log_dir={log_dir}"], body
    )
    assert result.returncode == 0, result.stderr
    names = {
        "serverlog.0": "server.0",
        "serverlog.1": "server.1",
        "workerlog.0": "worker.0",
        "workerlog.1": "worker.1",
    }
    assert sorted(p.name for p in log_dir.iterdir()) == sorted(names)
    for log, who in names.items():
        text = (log_dir / log).read_text()
        assert f"hello from {who}\n" in text and f"stderr of {who}\n" in text
        others = set(names.values()) - {who}
        assert not any(f"from {o}\n" in text for o in others)
    assert "hello from" not in result.stdout


@pytest.mark.parametrize(
    "options, hint",
    [
        (["--servers=127.0.0.1:notaport", "--worker_num=1"], "bad endpoint '127.0.0.1:notaport'"),
        (
            ["--servers=127.0.0.1:6170,127.0.0.1:6171", "--server_num=3", "--worker_num=1"],
            "--servers lists 2 endpoints but --server_num=3",
        ),
        (["--server_num=1", "--worker_num=1", "--gpus=0"], "cannot be combined"),
        (["--worker_num=2"], "parameter-server mode needs servers"),
    ],
)
def test_wrong_option_combinations_fail_with_a_hint(tmp_path, options, hint):
    script = lh.write_script(tmp_path, "")
    result = subprocess.run(
        lh.launcher_command(options, script),
        env=lh.job_env(tmp_path),
        cwd=lh.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert hint in result.stderr
    assert not (tmp_path / "pids").exists()


def test_missing_script_is_an_error_with_a_hint(tmp_path):
    result = subprocess.run(
        [*lh.launcher_command(["--server_num=1", "--worker_num=1"], tmp_path / "nope.py")],
        env=lh.job_env(tmp_path),
        cwd=lh.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "does not exist" in result.stderr
    result = subprocess.run(
        lh.launcher_command(["--worker_num=1"], tmp_path)[:-1],
        env=lh.job_env(tmp_path),
        cwd=lh.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "no training script given" in result.stderr


def test_help_documents_every_option_with_an_example(tmp_path):
    result = subprocess.run(
        [*lh.launcher_command(["--help"], tmp_path)[:-1]],
        env=lh.job_env(tmp_path),
        cwd=lh.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    options = [
        "--server_num",
        "--worker_num",
        "--servers",
        "--workers",
        "--collective",
        "--gpus",
        "--nproc_per_node",
        "--ips",
        "--started_port",
        "--host",
        "--store_port",
        "--log_dir",
        "--grace_period",
        "--log_tail",
    ]
    flat = " ".join(result.stdout.split())
    for option in options:
        assert f"(e.g. {option}" in flat or f"e.g. {option}" in flat, option
