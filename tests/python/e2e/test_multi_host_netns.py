"""A job across network namespaces (issue 30): the test makes two namespaces joined by a veth
pair, each with an address of its own (169.254.213.1 and .2, link-local, on this machine only),
and starts one fleetrun per namespace, as on two machines whose only link is that wire. Needs
root (ip netns); skips with the reason otherwise. The namespaces go whatever happens."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from tests.python.e2e import launch_helpers as lh
from tests.python.e2e import multi_host as mh

pytestmark = pytest.mark.timeout(240)

ADDRESSES = ("169.254.213.1", "169.254.213.2")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture
def namespaces():
    """Two namespaces (names) joined by a veth pair, each end holding one of ADDRESSES."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (ip netns add)")
    tag = uuid.uuid4().hex[:6]
    names = [f"fleet-{tag}-a", f"fleet-{tag}-b"]
    made = []
    try:
        for name in names:
            try:
                _ip("netns", "add", name)
            except (subprocess.CalledProcessError, OSError) as e:
                pytest.skip(f"cannot make a network namespace: {e}")
            made.append(name)
            _ip("-n", name, "link", "set", "lo", "up")
        _ip("link", "add", f"v{tag}a", "netns", names[0], "type", "veth", "peer", f"v{tag}b",
            "netns", names[1])  # fmt: skip
        for name, end, address in zip(names, (f"v{tag}a", f"v{tag}b"), ADDRESSES):
            _ip("-n", name, "addr", "add", f"{address}/24", "dev", end)
            _ip("-n", name, "link", "set", end, "up")
        yield names
    finally:
        for name in made:  # deleting a namespace deletes its end of the pair, and so the pair
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


BODY = """
r = fleet.worker_index()
total = fleet.util.all_reduce(np.array([float(r + 1)]))
record("sum", dict(total=float(total[0]), host=os.environ["POD_IP"]))
fleet.util.barrier()
"""


def test_a_collective_job_across_two_network_namespaces(tmp_path, namespaces):
    started = 6170  # the namespaces are new: every port of theirs is free
    options = [f"--ips={','.join(ADDRESSES)}", "--nproc_per_node=2", f"--started_port={started}"]
    launchers = {}
    try:
        for name, host in zip(namespaces, ADDRESSES):
            script = lh.write_script(tmp_path, BODY)
            command = lh.launcher_command([*options, f"--host={host}"], script)
            launchers[host] = subprocess.Popen(
                ["ip", "netns", "exec", name, *command],
                env=lh.job_env(tmp_path, True, FLEET_JOB_ID="netns"),
                cwd=lh.REPO_ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        results = mh.finish(launchers)
    finally:
        for launcher in launchers.values():
            lh.stop_launcher(launcher)
    for host, (code, out, err) in results.items():
        assert code == 0, f"host {host}: {err[-3000:]}"
    sums = lh.recorded(tmp_path, "sum")
    assert sums == {f"worker.{r}": {"total": 10.0, "host": ADDRESSES[r // 2]} for r in range(4)}, (
        sums
    )
    assert lh.running(list(lh.pids(tmp_path).values())) == []
