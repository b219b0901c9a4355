"""A parameter server that stops says why on its output (fleet.ps.serving.serve_until_stopped):
the signal it received, or a requested stop (a Stop RPC, whose caller and job the server names).
It exits 0 either way, so to the fleetrun of a machine of servers only a stopped server looks
like one whose job ended; its line is what tells the two apart. And a server of a job obeys a
Stop only from a caller of that job: one that names no job may read and write, not stop it."""

from __future__ import annotations

import signal

import pytest

from fleet.errors import FleetError
from fleet.ps import PsClient, server_config, start_server
from fleet.testing.ps_reference import sgd_sparse_table

pytestmark = pytest.mark.timeout(120)

TABLES = [sgd_sparse_table()]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_server_names_the_signal(ps_servers, sig):
    cluster = ps_servers(TABLES, 1)
    cluster.procs[0].send_signal(sig)
    assert cluster.procs[0].wait(timeout=30) == 0
    line = f"parameter server {cluster.endpoints[0]}: stopping: received {sig.name}"
    assert line in cluster.log(0), cluster.log(0)


def test_a_server_told_to_stop_says_so(ps_servers):
    cluster = ps_servers(TABLES, 1)
    cluster.client().stop_servers()
    assert cluster.procs[0].wait(timeout=30) == 0
    log = cluster.log(0)
    assert f"parameter server {cluster.endpoints[0]}: stopping: stop requested" in log, log
    assert "received SIG" not in log, log


def test_a_jobs_server_obeys_only_a_stop_of_its_own_job(capfd):
    server = start_server(server_config(0, 1, TABLES), job_id="j")
    try:
        with PsClient([server.endpoint]) as anonymous:
            with pytest.raises(FleetError, match="this server belongs to job 'j' and the caller"):
                anonymous.stop_servers()
        assert not server.wait_for_stop_request(0)
        with PsClient([server.endpoint], job_id="j") as own:
            own.stop_servers()
        assert server.wait_for_stop_request(0)
    finally:
        server.shutdown(5.0)
    err = capfd.readouterr().err
    assert "parameter server: Stop RPC from ipv4:127.0.0.1:" in err, err
    assert "(job 'j'): stopping" in err, err
    assert err.count("Stop RPC from") == 1, err
