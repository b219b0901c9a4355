"""The Kubeflow training operator's PaddleJob, told in Paddle's variables by a rendezvous.

The operator (kubeflow/training-operator, pkg/controller.v1/paddlepaddle/envvar.go) does not
give a pod its rank or its peers. Every pod gets PADDLE_MASTER (host:port of the rendezvous: pod 0
of the Worker replicas in a collective job, pod 0 of the Master replicas in a PS job; that pod's
own value is "<its pod IP>:port"), PADDLE_NNODES (pods in the job), PADDLE_JOB_ID (the job's
name); in a PS job PADDLE_SERVER_NUM=1 on Master pods (each a parameter server) and
PADDLE_TRAINER_NUM=1 on Worker pods. paddle_environment() meets the other pods at PADDLE_MASTER
(the pod that is the master serves a TCP store there) and returns the variables
PaddleCloudRoleMaker reads:

  - this pod's address: POD_IP (the manifests set it from status.podIP), else POD_IP_DUMMY
    (the operator's, on pod 0), else the address of the pod's host name;
  - each pod takes the next index of its role in the order it joins, the master pod first (so
    the master is server 0, or worker 0), and listens on FLEET_PORT (default 6170, any port
    other than the master's, every pod having an address of its own);
  - worker 0 serves the workers' Gloo store on FLEET_PORT + 1.

The rendezvous waits FLEET_GLOO_TIMEOUT_S (default 120 s) for all PADDLE_NNODES pods, then fails
naming how many joined of each role.

A pod restarted in place (its container restarted, the pod and its address kept: the training
operator's restartPolicy OnFailure) after every pod joined takes its place again: it finds its
own endpoint among those registered and keeps that index, so the job's lists stay as they were
(see docs/design.md, elastic restart). Not the master pod: the rendezvous store lives in its
process and goes with it.
"""

from __future__ import annotations

import socket
import time
from typing import Any, Mapping, Optional

from fleet import _core
from fleet._endpoints import format_endpoint, parse_endpoint
from fleet.errors import InvalidArgument, Timeout

MASTER, NNODES = "PADDLE_MASTER", "PADDLE_NNODES"
SERVER_NUM, TRAINER_NUM = "PADDLE_SERVER_NUM", "PADDLE_TRAINER_NUM"
PORT, DEFAULT_PORT = "FLEET_PORT", 6170
_PREFIX = "fleet/paddlejob/"


def is_paddlejob(env: Mapping[str, str]) -> bool:
    return bool(env.get(MASTER, "").strip() and env.get(NNODES, "").strip())


def paddle_environment(env: Mapping[str, str], is_collective: bool) -> tuple[dict, Optional[Any]]:
    """(Paddle's variables for this pod, the rendezvous store server this pod serves or None:
    keep it while the job runs, the other pods may still read it)."""
    master_host, master_port = parse_endpoint(env[MASTER], MASTER)
    nnodes = int(env[NNODES])
    own = _own_address(env)
    is_server = bool(env.get(SERVER_NUM, "").strip())
    if is_collective and (is_server or env.get(TRAINER_NUM, "").strip()):
        raise InvalidArgument(
            f"fleet.init(is_collective=True) in a PaddleJob with Master replicas ({SERVER_NUM}/"
            f"{TRAINER_NUM} set): a collective PaddleJob has Worker replicas only"
        )
    job_id = env.get("PADDLE_JOB_ID", "").strip()
    timeout_s = float(env.get("FLEET_GLOO_TIMEOUT_S", "").strip() or 120)
    server = None
    if own == master_host:
        server = _core.TcpStoreServer(own, master_port, job_id=job_id)
    store = _core.TcpStore(master_host, master_port, connect_timeout_s=timeout_s, job_id=job_id)
    port = int(env.get(PORT, "").strip() or DEFAULT_PORT)
    role = "server" if is_server else "worker"
    # The master is index 0 of its role (servers in a PS job) whenever the others connect;
    # the others count from 1 there.
    is_ps = is_server or bool(env.get(TRAINER_NUM, "").strip())
    master_role = "server" if is_ps else "worker"
    endpoint = format_endpoint(own, port)
    index = None if server is not None else _place_of_a_restarted_pod(store, nnodes, role, endpoint)
    if index is None:
        if server is not None:
            index = 0
        else:
            index = store.add(_PREFIX + role, 1) - 1 + (role == master_role)
        store.set(f"{_PREFIX}{role}/{index}", endpoint.encode())
        store.add(_PREFIX + "joined", 1)
    deadline = time.monotonic() + timeout_s
    while store.add(_PREFIX + "joined", 0) < nnodes:
        if time.monotonic() > deadline:
            raise Timeout(
                f"PaddleJob rendezvous at {MASTER}={env[MASTER]}: {_joined(store)} of "
                f"{NNODES}={nnodes} pods joined within {timeout_s:g} s"
            )
        time.sleep(0.05)
    servers = _endpoints(store, "server", timeout_s, master_role == "server")
    workers = _endpoints(store, "worker", timeout_s, master_role == "worker")
    worker0_host = parse_endpoint(workers[0], "worker 0")[0]
    out = {
        "PADDLE_TRAINER_ENDPOINTS": ",".join(workers),
        "PADDLE_TRAINERS_NUM": str(len(workers)),
        "POD_IP": own,
        "PADDLE_PORT": str(port),
        "FLEET_GLOO_STORE_ENDPOINT": format_endpoint(worker0_host, port + 1),
        "TRAINING_ROLE": "PSERVER" if is_server else "TRAINER",
    }
    if servers:
        out["PADDLE_PSERVERS_IP_PORT_LIST"] = ",".join(servers)
    if not is_server:
        out["PADDLE_TRAINER_ID"] = str(index)
        out["PADDLE_CURRENT_ENDPOINT"] = workers[index]
    return out, server


def _place_of_a_restarted_pod(store: Any, nnodes: int, role: str, endpoint: str) -> Optional[int]:
    """This pod's index when the job's pods had all joined and one of them (of `role`) was
    this pod's endpoint: the pod was restarted in place. None when the job is still forming."""
    if store.add(_PREFIX + "joined", 0) < nnodes:
        return None
    for i in range(store.add(_PREFIX + role, 0) + 1):  # + 1: the master's index 0
        key = f"{_PREFIX}{role}/{i}"
        if store.check([key]) and store.get(key, 1.0).decode() == endpoint:
            return i
    raise InvalidArgument(
        f"PaddleJob rendezvous at {MASTER}: all {NNODES}={nnodes} pods joined already and "
        f"no {role} of the job is at {endpoint}; a restarted pod takes its place again only "
        "with the address it had (a recreated pod with a new address needs the job restarted)"
    )


def _own_address(env: Mapping[str, str]) -> str:
    for name in ("POD_IP", "POD_IP_DUMMY"):
        if env.get(name, "").strip():
            return env[name].strip()
    return socket.gethostbyname(socket.gethostname())


def _endpoints(store: Any, role: str, timeout_s: float, has_master: bool) -> list[str]:
    count = store.add(_PREFIX + role, 0) + has_master
    return [store.get(f"{_PREFIX}{role}/{i}", timeout_s).decode() for i in range(count)]


def _joined(store: Any) -> str:
    return ", ".join(f"{store.add(_PREFIX + r, 0)} {r}(s)" for r in ("server", "worker")) + (
        " besides the master"
    )
