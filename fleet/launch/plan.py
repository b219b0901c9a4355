"""Which processes this machine starts, and the environment each one gets.

A pure function of the parsed command line, this machine's addresses and a port picker, so the
layout can be checked without starting anything.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import os
import socket
import struct
import sys
import time
from typing import Callable, Optional

from fleet import role_maker as rm
from fleet._endpoints import format_endpoint, parse_endpoint
from fleet.errors import InvalidArgument

PortPicker = Callable[[str, int], list[int]]
# The fluid 1.x distributed manual's variables, set for parameter-server jobs so that its
# DistributeTranspiler scripts run under fleetrun (fleet.role_maker reads fleetrun's own).
MANUAL_ROLE, MANUAL_CURRENT_IP = "PADDLE_TRAINING_ROLE", "PADDLE_CURRENT_IP"
MANUAL_PSERVER_IPS, MANUAL_PSERVER_PORT = "PADDLE_PSERVER_IPS", "PADDLE_PSERVER_PORT"
MANUAL_TRAINERS = "PADDLE_TRAINERS"
JobIdMaker = Callable[[], str]


@dataclasses.dataclass
class ProcSpec:
    """One process to start: its role, its rank within that role, and its job variables."""

    role: str  # "server" or "worker"
    rank: int
    env: dict[str, str]

    @property
    def name(self) -> str:
        return f"{self.role}.{self.rank}"

    @property
    def log_name(self) -> str:
        return f"{self.role}log.{self.rank}"


@dataclasses.dataclass
class JobPlan:
    mode: str  # "ps" or "collective"
    command: list[str]
    procs: list[ProcSpec]


def free_ports(host: str, count: int) -> list[int]:
    """`count` distinct ports free on `host` right now (held open together so they differ)."""
    held = HeldPorts()
    try:
        return held(host, count)
    finally:
        held.close()


class HeldPorts:
    """A PortPicker whose ports stay bound until close(). A plan picks its servers', workers'
    and store's ports in separate calls, and a port is the OS's to hand out again as soon as its
    socket closes: two calls of a picker that released its ports at once gave one job's server
    and worker the same port (seen in ps_train.py's sync job)."""

    def __init__(self) -> None:
        self._sockets: list[socket.socket] = []

    def __call__(self, host: str, count: int) -> list[int]:
        picked = []
        for _ in range(count):
            s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            self._sockets.append(s)
            s.bind((host, 0))
            picked.append(s.getsockname()[1])
        return picked

    def close(self) -> None:
        for s in self._sockets:
            s.close()
        self._sockets = []


def local_addresses() -> set[str]:
    """This machine's IPv4 addresses (every interface), its host name and loopback."""
    found = {"127.0.0.1", "localhost", socket.gethostname()}
    try:
        found.update(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        pass
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                packed = struct.pack("256s", name.encode()[:15])
                # SIOCGIFADDR: the interface's IPv4 address.
                found.add(socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, packed)[20:24]))
            except OSError:
                continue
    return found


def fresh_job_id() -> str:
    """A job identity no other job on any machine is likely to have."""
    return f"fleetrun-{socket.gethostname()}-{os.getpid()}-{time.time_ns():x}"


def build_plan(
    args: argparse.Namespace,
    environ: dict[str, str],
    addresses: Optional[set[str]] = None,
    pick_ports: Optional[PortPicker] = None,
    make_job_id: JobIdMaker = fresh_job_id,
) -> JobPlan:
    """The processes this machine runs for the checked `args` (see fleet.launch.args). Ports
    not given come from `pick_ports`, by default free ones held until the plan is made, so that
    all of them differ."""
    args = argparse.Namespace(**{**vars(args), "host": own_host(args, environ)})
    is_local = _host_matcher(args.host, addresses)
    command = [sys.executable, "-u", args.training_script, *args.training_script_args]
    held = HeldPorts() if pick_ports is None else None
    try:
        if args.mode == "ps":
            procs, one_machine = _plan_ps(args, environ, is_local, pick_ports or held)
        else:
            procs, one_machine = _plan_collective(args, environ, is_local, pick_ports or held)
    finally:
        if held is not None:
            held.close()
    job = _job_identity(environ, one_machine, make_job_id)
    for proc in procs:
        proc.env.update(job)
    if args.metrics_port is not None:
        _metrics_ports(procs, args.metrics_port)
    return JobPlan(args.mode, command, procs)


def _metrics_ports(procs: list[ProcSpec], base: int) -> None:
    """FLEET_METRICS_PORT for each process: BASE+i, i its index in the job's launch order
    (servers first, then workers; a collective job's rank), so every process of the job, on
    any machine, has a port of its own that a scrape config can list."""
    for proc in procs:
        servers = proc.env.get(rm.PSERVERS, "")
        offset = len(servers.split(",")) if servers and proc.role == "worker" else 0
        port = base + offset + proc.rank
        if port > 65535:
            raise InvalidArgument(
                f"--metrics_port={base}: {proc.name} would serve on port {port}, past 65535; "
                "hint: a lower BASE"
            )
        proc.env[rm.METRICS_PORT] = str(port)


def own_host(args: argparse.Namespace, environ: dict[str, str]) -> Optional[str]:
    """This machine's address as the job lists it: --host, else POD_IP (what Kubernetes and
    Kubeflow give a pod), else None (matched against this machine's interfaces)."""
    return args.host or environ.get(rm.POD_IP, "").strip() or None


def _job_identity(environ: dict[str, str], one_machine: bool, make_job_id: JobIdMaker) -> dict:
    """FLEET_JOB_ID for the processes (see fleet.role_maker): the user's or a cluster manager's
    when set (the processes inherit it); a fresh one for a job on this machine alone; none for
    a job over several machines, whose fleetruns could not agree on a fresh one (the processes
    then derive it from the job's endpoints)."""
    if any(environ.get(name, "").strip() for name in (rm.JOB_ID, *rm.CLUSTER_JOB_ID_VARS)):
        return {}
    return {rm.JOB_ID: make_job_id()} if one_machine else {}


def _host_matcher(host: Optional[str], addresses: Optional[set[str]]) -> Callable[[str], bool]:
    if host:
        return lambda ip: ip == host
    known = local_addresses() if addresses is None else addresses
    return lambda ip: ip in known


def _endpoints_or_local(
    listed: list[str], count: Optional[int], host: str, pick_ports: PortPicker
) -> list[str]:
    if listed:
        return listed
    return [format_endpoint(host, port) for port in pick_ports(host, count)]


def _store_endpoint(
    environ: dict[str, str],
    first_worker_host: str,
    all_local: bool,
    store_port: Optional[int],
    pick_ports: PortPicker,
    hint: str,
) -> dict:
    if environ.get(rm.GLOO_STORE_PATH):
        return {}  # the file store named by the user's environment
    if store_port is None:
        if not all_local:
            raise InvalidArgument(
                "the job spans several machines, so worker 0's rendezvous "
                f"store needs a fixed port; hint: {hint}"
            )
        store_port = pick_ports(first_worker_host, 1)[0]
    return {rm.GLOO_STORE_ENDPOINT: format_endpoint(first_worker_host, store_port)}


def _plan_ps(
    args: argparse.Namespace,
    environ: dict[str, str],
    is_local: Callable[[str], bool],
    pick_ports: PortPicker,
) -> tuple[list[ProcSpec], bool]:
    host = args.host or "127.0.0.1"
    servers = _endpoints_or_local(args.servers, args.server_num, host, pick_ports)
    workers = _endpoints_or_local(args.workers, args.worker_num, host, pick_ports)
    hosts = [parse_endpoint(e, "--servers/--workers")[0] for e in servers + workers]
    if not any(is_local(h) for h in hosts):
        raise InvalidArgument(
            f"none of the endpoints ({', '.join(servers + workers)}) is on "
            "this machine; hint: pass --host=<this machine's IP as written "
            "in --servers/--workers>"
        )
    common = {
        rm.PSERVERS: ",".join(servers),
        rm.TRAINERS_NUM: str(len(workers)),
        rm.TRAINER_ENDPOINTS: ",".join(workers),
    }
    common.update(
        _store_endpoint(
            environ,
            hosts[len(servers)],
            all(map(is_local, hosts)),
            args.store_port,
            pick_ports,
            "add --store_port=<a free port on worker 0's machine> or set "
            f"{rm.GLOO_STORE_PATH} to a shared directory",
        )
    )
    common.update(_manual_variables(servers, len(workers)))
    procs = []
    for role, endpoints in (("server", servers), ("worker", workers)):
        for rank, endpoint in enumerate(endpoints):
            ip, port = parse_endpoint(endpoint, f"--{role}s")
            if not is_local(ip):
                continue
            env = dict(common, **{rm.POD_IP: ip, rm.PADDLE_PORT: str(port)})
            env[MANUAL_CURRENT_IP] = ip
            env[MANUAL_ROLE] = "PSERVER" if role == "server" else "TRAINER"
            if role == "server":
                env[rm.TRAINING_ROLE] = "PSERVER"
            else:
                env.update(
                    {
                        rm.TRAINING_ROLE: "TRAINER",
                        rm.TRAINER_ID: str(rank),
                        rm.CURRENT_ENDPOINT: endpoint,
                    }
                )
            procs.append(ProcSpec(role, rank, env))
    return procs, all(map(is_local, hosts))


def _manual_variables(servers: list[str], workers: int) -> dict[str, str]:
    """The variables the fluid distributed manual's DistributeTranspiler scripts read: the
    servers' IPs and, when they all listen on one port (one server a machine), that port."""
    addresses = [parse_endpoint(e, "--servers") for e in servers]
    env = {
        MANUAL_PSERVER_IPS: ",".join(ip for ip, _ in addresses),
        MANUAL_TRAINERS: str(workers),
    }
    ports = {port for _, port in addresses}
    if len(ports) == 1:
        env[MANUAL_PSERVER_PORT] = str(ports.pop())
    return env


def _plan_collective(
    args: argparse.Namespace,
    environ: dict[str, str],
    is_local: Callable[[str], bool],
    pick_ports: PortPicker,
) -> tuple[list[ProcSpec], bool]:
    nproc = args.nproc_per_node
    nodes = args.ips or [args.host or "127.0.0.1"]
    if len(nodes) > 1:
        matches = [i for i, ip in enumerate(nodes) if is_local(ip)]
        if args.host and not matches:
            raise InvalidArgument(
                f"--host={args.host} (or POD_IP) is not one of --ips={','.join(nodes)}; hint: "
                "give this machine's address as written in --ips"
            )
        if len(matches) != 1:
            raise InvalidArgument(
                f"cannot tell which of --ips={','.join(nodes)} is this machine "
                f"({'none' if not matches else 'several'} match); hint: pass "
                "--host=<this machine's IP as written in --ips>"
            )
        node = matches[0]
        endpoints = [
            format_endpoint(ip, args.started_port + j) for ip in nodes for j in range(nproc)
        ]
        store_port = args.store_port or args.started_port + nproc
    else:
        node = 0
        endpoints = [format_endpoint(nodes[0], p) for p in pick_ports(nodes[0], nproc)]
        store_port = args.store_port
    common = {rm.TRAINERS_NUM: str(len(endpoints)), rm.TRAINER_ENDPOINTS: ",".join(endpoints)}
    common.update(_store_endpoint(environ, nodes[0], True, store_port, pick_ports, ""))
    procs = []
    for local_rank in range(nproc):
        rank = node * nproc + local_rank
        env = dict(
            common,
            **{
                rm.TRAINING_ROLE: "TRAINER",
                rm.TRAINER_ID: str(rank),
                rm.CURRENT_ENDPOINT: endpoints[rank],
                rm.POD_IP: nodes[node],
                rm.PADDLE_PORT: str(parse_endpoint(endpoints[rank], "")[1]),
            },
        )
        if args.gpus:
            # The process sees only its own GPU, which is therefore device 0 inside it.
            env.update({"CUDA_VISIBLE_DEVICES": args.gpus[local_rank], "FLAGS_selected_gpus": "0"})
        procs.append(ProcSpec("worker", rank, env))
    return procs, len(nodes) == 1
