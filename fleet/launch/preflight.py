"""Checks of a job plan against this machine, before anything starts.

build_plan (plan.py) only reads the command line; these checks touch the machine: that --host
(or POD_IP) is an address of this machine, that no two processes of the job share an endpoint,
and that the ports this machine's processes will listen on are free. Each failure is an
InvalidArgument naming the address or endpoint at fault, so that a typo or a leftover process
is reported at once instead of as a server that cannot listen halfway through the start.
"""

from __future__ import annotations

import errno
import socket
from typing import Optional

from fleet import role_maker as rm
from fleet._endpoints import parse_endpoint
from fleet.errors import InvalidArgument
from fleet.launch.plan import JobPlan


def check_plan(plan: JobPlan, host: Optional[str]) -> None:
    """Raises InvalidArgument when `plan` cannot start on this machine (see the module doc)."""
    if host:
        _check_own_address(host)
    _check_distinct_endpoints(plan)
    for what, endpoint in _listening_endpoints(plan):
        _check_port_free(what, endpoint)


def _check_own_address(host: str) -> None:
    """An address is this machine's when a socket can be bound to it (every 127.x.y.z is)."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.bind((host, 0))
    except socket.gaierror:
        raise InvalidArgument(f"--host={host}: not an IP address or a known host name") from None
    except OSError as e:
        if e.errno != errno.EADDRNOTAVAIL:
            raise InvalidArgument(f"--host={host}: cannot listen there: {e.strerror}") from None
        raise InvalidArgument(
            f"--host={host} (or POD_IP) is not an address of this machine (no interface has "
            "it); hint: give the address of this machine as written in --ips/--servers/--workers"
        ) from None


def _check_distinct_endpoints(plan: JobPlan) -> None:
    """A server and a worker listed with the same ip:port, or the store on a process's port."""
    env = plan.procs[0].env if plan.procs else {}
    owners: dict[str, str] = {}
    lists = [("server", rm.PSERVERS), ("worker", rm.TRAINER_ENDPOINTS)]
    for role, name in lists:
        for i, endpoint in enumerate(filter(None, env.get(name, "").split(","))):
            _claim(owners, endpoint, f"{role} {i}")
    if env.get(rm.GLOO_STORE_ENDPOINT):
        _claim(owners, env[rm.GLOO_STORE_ENDPOINT], "the rendezvous store (--store_port)")


def _claim(owners: dict[str, str], endpoint: str, who: str) -> None:
    host, port = parse_endpoint(endpoint, who)
    key = f"{host}:{port}"
    if key in owners:
        raise InvalidArgument(
            f"{endpoint} is given to both {owners[key]} and {who}; hint: every process of the "
            "job (and the store) needs its own ip:port"
        )
    owners[key] = who


def _listening_endpoints(plan: JobPlan) -> list[tuple[str, str]]:
    """(who, ip:port) of every socket this machine's processes will listen on at start."""
    found = []
    for proc in plan.procs:
        ip, port = proc.env.get(rm.POD_IP), proc.env.get(rm.PADDLE_PORT)
        if ip and port:
            found.append((proc.name, f"{ip}:{port}"))
    store = plan.procs[0].env.get(rm.GLOO_STORE_ENDPOINT) if plan.procs else None
    first_worker = [p for p in plan.procs if p.role == "worker" and p.rank == 0]
    if store and first_worker:  # worker 0 serves the store
        found.append(("the rendezvous store of worker.0", store))
    return found


def _check_port_free(who: str, endpoint: str) -> None:
    host, port = parse_endpoint(endpoint, who)
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        # SO_REUSEADDR as the servers set it: a port left in TIME_WAIT by a previous job is
        # free; one another process listens on is not.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise InvalidArgument(
                    f"port {port} of {endpoint} ({who}) is in use on this machine; hint: stop "
                    f"what listens there (ss -ltnp 'sport = :{port}') or pick another port"
                ) from None
            raise InvalidArgument(
                f"{endpoint} ({who}): cannot listen there: {e.strerror}"
            ) from None
