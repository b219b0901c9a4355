"""Role makers: who this process is in a Fleet job (server or worker, which index, its peers).

`PaddleCloudRoleMaker` reads the environment that `fleetrun` (or a cluster scheduler speaking
PaddlePaddle's variable names) sets; it is the one place where a training process reads the job's
environment. `UserDefinedRoleMaker` takes the same facts as arguments, for hand-written set-ups.

Environment read by PaddleCloudRoleMaker:

  parameter-server jobs          TRAINING_ROLE (PSERVER | TRAINER), PADDLE_PSERVERS_IP_PORT_LIST,
                                 PADDLE_TRAINERS_NUM (or PADDLE_NUM_TRAINERS); PADDLE_TRAINER_ID
                                 for trainers; POD_IP and PADDLE_PORT for servers (their own
                                 endpoint); optionally PADDLE_TRAINER_ENDPOINTS.
  Kubeflow PaddleJob             PADDLE_MASTER, PADDLE_NNODES (+ PADDLE_SERVER_NUM on PS
                                 servers): the pods meet there, see fleet.paddlejob_env.
  Slurm (srun) or Open MPI       no Paddle variable set: SLURM_PROCID/SLURM_NTASKS/... or
  (mpirun)                       OMPI_COMM_WORLD_RANK/... (+ FLEET_HOSTS) give them, and
                                 FLEET_SERVER_NUM which ranks are servers: see fleet.cluster_env.
  no launcher at all             fleet.init() runs the script as a one-worker job (Paddle 2.x's
                                 rule); see role_from_environment.
  collective jobs                PADDLE_TRAINER_ID, PADDLE_TRAINER_ENDPOINTS,
                                 PADDLE_CURRENT_ENDPOINT; optionally PADDLE_TRAINERS_NUM.
  worker utilities (both modes)  FLEET_GLOO_STORE_PATH (a shared directory) or
                                 FLEET_GLOO_STORE_ENDPOINT (ip:port of the TCP store served by
                                 worker 0); FLEET_GLOO_TIMEOUT_S (rendezvous timeout, default 120);
                                 FLEET_GLOO_COLLECTIVE_TIMEOUT_S (bound of each all_reduce /
                                 all_gather / barrier that passes no timeout_s, default 1800).
  job identity (both modes)      FLEET_JOB_ID; else the first set of PADDLE_JOB_ID,
                                 SLURM_JOB_ID, PBS_JOBID, LSB_JOBID (a cluster manager's job id).
  live metrics (any role)        FLEET_METRICS_PORT: the port this process serves its metrics
                                 on (fleet.monitoring; fleetrun --metrics_port sets it).

The job identity (`RoleMakerBase.job_id`) travels with every call to a parameter server and to
the rendezvous store, so that a process of another job (two jobs given the same ports) is refused
at its first call, naming both jobs. fleetrun makes a fresh one for a job on one machine; a job
over several machines needs the same FLEET_JOB_ID on each (or a cluster manager's variable). When
none is set, the identity is derived from the job's endpoints, which every process of a job
shares: two jobs launched with the same endpoint lists are then not told apart.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import logging
import os
from typing import Mapping, Optional, Sequence

from fleet import paddlejob_env
from fleet._endpoints import parse_endpoint, parse_endpoint_list
from fleet.cluster_env import paddle_environment, started_by_a_manager
from fleet.errors import InvalidArgument

logger = logging.getLogger("fleet")

# Variable names shared with the launcher (fleet/launch), which sets them.
TRAINING_ROLE = "TRAINING_ROLE"
PSERVERS = "PADDLE_PSERVERS_IP_PORT_LIST"
TRAINERS_NUM = "PADDLE_TRAINERS_NUM"
# The distributed manual's spelling of the same count (Paddle reads both).
TRAINERS_NUM_ALIAS = "PADDLE_NUM_TRAINERS"
TRAINER_ID = "PADDLE_TRAINER_ID"
TRAINER_ENDPOINTS = "PADDLE_TRAINER_ENDPOINTS"
CURRENT_ENDPOINT = "PADDLE_CURRENT_ENDPOINT"
POD_IP = "POD_IP"
PADDLE_PORT = "PADDLE_PORT"
GLOO_STORE_PATH = "FLEET_GLOO_STORE_PATH"
GLOO_STORE_ENDPOINT = "FLEET_GLOO_STORE_ENDPOINT"
GLOO_TIMEOUT = "FLEET_GLOO_TIMEOUT_S"
GLOO_COLLECTIVE_TIMEOUT = "FLEET_GLOO_COLLECTIVE_TIMEOUT_S"
JOB_ID = "FLEET_JOB_ID"
METRICS_PORT = "FLEET_METRICS_PORT"
# Job ids that cluster managers set for every process of a job, in the order they are tried.
CLUSTER_JOB_ID_VARS = ("PADDLE_JOB_ID", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID")

_PS_EXPECTED = (
    f"{TRAINING_ROLE}=PSERVER|TRAINER, {PSERVERS}=ip:port[,ip:port...], "
    f"{TRAINERS_NUM}=<int >= 1>, and {TRAINER_ID}=<0..n-1> for a trainer or "
    f"{POD_IP}=<ip> + {PADDLE_PORT}=<port> (an endpoint of {PSERVERS}) for a server"
)
_COLLECTIVE_EXPECTED = (
    f"{TRAINER_ID}=<0..n-1>, {TRAINER_ENDPOINTS}=ip:port[,ip:port...] and "
    f"{CURRENT_ENDPOINT}=<this trainer's entry of {TRAINER_ENDPOINTS}>"
)
_ALL_VARS = (
    TRAINING_ROLE,
    PSERVERS,
    TRAINERS_NUM,
    TRAINER_ID,
    TRAINER_ENDPOINTS,
    CURRENT_ENDPOINT,
    POD_IP,
    PADDLE_PORT,
    GLOO_STORE_PATH,
    GLOO_STORE_ENDPOINT,
    GLOO_TIMEOUT,
    GLOO_COLLECTIVE_TIMEOUT,
    JOB_ID,
)


class Role(enum.IntEnum):
    """The part a process plays (numbered as in PaddlePaddle)."""

    WORKER = 1
    SERVER = 2


@dataclasses.dataclass(frozen=True)
class GlooConfig:
    """How the workers' Gloo group finds itself (see fleet.base.util_base).

    store_path wins over store_endpoint; a group of one worker needs neither.
    """

    store_endpoint: Optional[str] = None  # "ip:port" of the TCP store that worker 0 serves
    store_path: Optional[str] = None  # directory on a filesystem every worker shares
    hostname: str = "127.0.0.1"  # this node's address, where Gloo's TCP transport listens
    timeout_s: float = 120.0  # rendezvous: every worker joining and connecting
    collective_timeout_s: float = 1800.0  # one all_reduce / all_gather / barrier

    def __post_init__(self) -> None:
        if self.store_endpoint is not None:
            parse_endpoint(self.store_endpoint, GLOO_STORE_ENDPOINT)
        for name in ("timeout_s", "collective_timeout_s"):
            if not getattr(self, name) > 0:
                raise InvalidArgument(
                    f"GlooConfig.{name} must be positive, got {getattr(self, name)!r}"
                )


class RoleMakerBase:
    """The facts every role maker establishes; subclasses only differ in where they come from."""

    # The port this process serves live metrics on (fleet.monitoring), None for none.
    metrics_port: Optional[int] = None

    def __init__(
        self,
        *,
        is_collective: bool,
        role: Role,
        current_id: int,
        worker_num: int,
        server_endpoints: Sequence[str],
        worker_endpoints: Sequence[str],
        gloo: GlooConfig,
        job_id: Optional[str] = None,
    ) -> None:
        self._is_collective = is_collective
        self._role = Role(role)
        self._current_id = current_id
        self._worker_num = worker_num
        self._server_endpoints = list(server_endpoints)
        self._worker_endpoints = list(worker_endpoints)
        self._gloo = gloo
        self._job_id = job_id or derived_job_id(
            self._server_endpoints, self._worker_num, self._worker_endpoints, gloo
        )
        self._validate()

    def _validate(self) -> None:
        who = type(self).__name__
        if self._worker_num < 1:
            raise InvalidArgument(f"{who}: worker_num must be >= 1, got {self._worker_num}")
        if self._worker_endpoints and len(self._worker_endpoints) != self._worker_num:
            raise InvalidArgument(
                f"{who}: {len(self._worker_endpoints)} worker endpoints "
                f"{self._worker_endpoints} for worker_num={self._worker_num}"
            )
        if self._role == Role.WORKER and not 0 <= self._current_id < self._worker_num:
            raise InvalidArgument(
                f"{who}: worker index {self._current_id} is outside "
                f"0..{self._worker_num - 1} (worker_num={self._worker_num})"
            )
        if self._role == Role.SERVER:
            if self._is_collective:
                raise InvalidArgument(f"{who}: a collective job has no servers")
            if not 0 <= self._current_id < len(self._server_endpoints):
                raise InvalidArgument(
                    f"{who}: server index {self._current_id} is outside the "
                    f"{len(self._server_endpoints)} server endpoints {self._server_endpoints}"
                )

    @property
    def is_collective(self) -> bool:
        return self._is_collective

    @property
    def role(self) -> Role:
        return self._role

    @property
    def gloo(self) -> GlooConfig:
        return self._gloo

    @property
    def job_id(self) -> str:
        """Who this job is, for the servers and the rendezvous store (see the module doc)."""
        return self._job_id

    def is_worker(self) -> bool:
        return self._role == Role.WORKER

    def is_server(self) -> bool:
        return self._role == Role.SERVER

    def is_first_worker(self) -> bool:
        return self.is_worker() and self._current_id == 0

    def worker_index(self) -> int:
        if not self.is_worker():
            raise InvalidArgument(
                f"worker_index(): this process is server {self._current_id}, "
                "not a worker (use server_index())"
            )
        return self._current_id

    def server_index(self) -> int:
        if not self.is_server():
            raise InvalidArgument(
                f"server_index(): this process is worker {self._current_id}, "
                "not a server (use worker_index())"
            )
        return self._current_id

    def worker_num(self) -> int:
        return self._worker_num

    def server_num(self) -> int:
        return len(self._server_endpoints)

    def server_endpoints(self) -> list[str]:
        return list(self._server_endpoints)

    def worker_endpoints(self) -> list[str]:
        """The workers' endpoints; empty in a parameter-server job launched without them."""
        return list(self._worker_endpoints)

    def __repr__(self) -> str:
        kind = "collective" if self._is_collective else "parameter-server"
        return (
            f"{type(self).__name__}({kind}, {self._role.name.lower()} {self._current_id}, "
            f"workers={self._worker_num}, servers={self._server_endpoints})"
        )


class UserDefinedRoleMaker(RoleMakerBase):
    """A role given by hand, e.g. `UserDefinedRoleMaker(current_id=0, role=Role.SERVER,
    worker_num=2, server_endpoints=["127.0.0.1:6170"])`. Takes Paddle 2.x's keywords too:
    `is_collective`, and `init_gloo` (accepted: Fleet makes the workers' Gloo group on the first
    fleet.util call either way); any other keyword is refused, naming it."""

    def __init__(
        self,
        current_id: int = 0,
        role: Role = Role.WORKER,
        worker_num: int = 1,
        server_endpoints: Optional[Sequence[str]] = None,
        worker_endpoints: Optional[Sequence[str]] = None,
        is_collective: bool = False,
        gloo: Optional[GlooConfig] = None,
        job_id: Optional[str] = None,
        init_gloo: bool = False,
        **unknown: object,
    ) -> None:
        _refuse_unknown(type(self).__name__, unknown)
        servers = list(server_endpoints or [])
        workers = list(worker_endpoints or [])
        for endpoint in servers:
            parse_endpoint(endpoint, "server_endpoints")
        for endpoint in workers:
            parse_endpoint(endpoint, "worker_endpoints")
        super().__init__(
            is_collective=is_collective,
            role=role,
            current_id=int(current_id),
            worker_num=int(worker_num),
            server_endpoints=servers,
            worker_endpoints=workers,
            gloo=gloo or GlooConfig(),
            job_id=job_id,
        )


class UserDefinedCollectiveRoleMaker(UserDefinedRoleMaker):
    """Paddle 1.x's collective role given by hand: this worker's index among `worker_endpoints`
    (every rank's ip:port)."""

    def __init__(
        self, current_id: int = 0, worker_endpoints: Optional[Sequence[str]] = None
    ) -> None:
        workers = list(worker_endpoints or [])
        if not workers:
            raise InvalidArgument(
                "UserDefinedCollectiveRoleMaker: worker_endpoints must list every rank's ip:port"
            )
        super().__init__(
            current_id=current_id,
            role=Role.WORKER,
            worker_num=len(workers),
            worker_endpoints=workers,
            is_collective=True,
        )


def _refuse_unknown(who: str, unknown: Mapping[str, object]) -> None:
    if unknown:
        raise InvalidArgument(
            f"{who}: unknown keyword(s) {', '.join(sorted(unknown))} (Fleet takes current_id, "
            "role, worker_num, server_endpoints, worker_endpoints, is_collective, init_gloo, "
            "gloo, job_id)"
        )


class PaddleCloudRoleMaker(RoleMakerBase):
    """The role fleetrun (or a PaddleCloud-style scheduler) describes in the environment.

    Raises fleet.errors.InvalidArgument listing the variables found and those expected when the
    environment is incomplete or inconsistent. `init_gloo` (Paddle 2.x) is accepted: Fleet makes
    the workers' Gloo group on the first fleet.util call either way.
    """

    def __init__(
        self,
        is_collective: bool = False,
        environ: Optional[Mapping[str, str]] = None,
        init_gloo: bool = False,
        **unknown: object,
    ) -> None:
        _refuse_unknown(type(self).__name__, unknown)
        env = dict(os.environ if environ is None else environ)
        parse = _parse_collective if is_collective else _parse_ps
        try:
            _read_trainers_num_alias(env)
            facts = parse(env)
            gloo = _parse_gloo(env, facts.pop("hostname"))
        except InvalidArgument as e:
            expected = _COLLECTIVE_EXPECTED if is_collective else _PS_EXPECTED
            found = (
                ", ".join(f"{k}={env[k]}" for k in (*_ALL_VARS, TRAINERS_NUM_ALIAS) if k in env)
                or "none of them"
            )
            raise InvalidArgument(
                f"PaddleCloudRoleMaker: {e}\n  found: {found}\n  expected: "
                f"{expected}\n  (fleetrun sets these; see fleetrun --help)"
            ) from None
        super().__init__(is_collective=is_collective, gloo=gloo, job_id=job_id_of(env), **facts)
        # Set by fleetrun --max_restarts on a restarted job: its latest complete checkpoint.
        self.restart_checkpoint: Optional[str] = env.get("FLEET_RESTART_CHECKPOINT") or None
        self.metrics_port = metrics_port_of(env)


def _read_trainers_num_alias(env: dict[str, str]) -> None:
    """PADDLE_NUM_TRAINERS stands for PADDLE_TRAINERS_NUM when that is unset; both set and
    different is an error."""
    alias = env.get(TRAINERS_NUM_ALIAS, "").strip()
    if not alias:
        return
    current = env.get(TRAINERS_NUM, "").strip()
    if current and current != alias:
        raise InvalidArgument(f"{TRAINERS_NUM}={current} but {TRAINERS_NUM_ALIAS}={alias}")
    env[TRAINERS_NUM] = alias


# Variables that only a launcher (fleetrun, a cluster scheduler) sets for a training process.
_LAUNCH_VARS = (
    TRAINING_ROLE,
    PSERVERS,
    TRAINERS_NUM,
    TRAINERS_NUM_ALIAS,
    TRAINER_ID,
    TRAINER_ENDPOINTS,
    CURRENT_ENDPOINT,
    PADDLE_PORT,
)


def is_launched(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether a launcher (fleetrun, a scheduler speaking Paddle's variables), a Kubeflow
    PaddleJob, srun or mpirun started this process: a script that also runs alone asks this
    before fleet.init(is_collective=True)."""
    env = os.environ if environ is None else environ
    return (
        any(
            env.get(k, "").strip()
            for k in _LAUNCH_VARS
            if k not in (TRAINERS_NUM, TRAINERS_NUM_ALIAS)
        )
        or paddlejob_env.is_paddlejob(env)
        or started_by_a_manager(env)
    )


def role_from_environment(
    is_collective: bool, environ: Optional[Mapping[str, str]] = None
) -> RoleMakerBase:
    """fleet.init()'s role without a role maker: PaddleCloudRoleMaker(is_collective) when a
    launcher set the job's variables, or when Slurm or Open MPI started the process (its
    variables told in Paddle's by fleet.cluster_env); with none of them, as in Paddle 2.x, a
    one-worker job (worker 0 of 1, no servers) announced in one line. A trainer count above 1
    without the rest of a launch is an error: the job asked for more processes than it got."""
    env = dict(os.environ if environ is None else environ)
    launch = {k: env[k].strip() for k in _LAUNCH_VARS if env.get(k, "").strip()}
    counts = {k: v for k, v in launch.items() if k in (TRAINERS_NUM, TRAINERS_NUM_ALIAS)}
    if len(launch) > len(counts):
        return PaddleCloudRoleMaker(is_collective=is_collective, environ=env)
    if paddlejob_env.is_paddlejob(env):  # Kubeflow's PaddleJob: a rendezvous at PADDLE_MASTER
        translated, server = paddlejob_env.paddle_environment(env, is_collective)
        role = PaddleCloudRoleMaker(is_collective=is_collective, environ={**env, **translated})
        role.rendezvous_server = server  # the other pods may still read it: kept with the role
        return role
    # No launcher, but a cluster manager (srun, mpirun): its variables told in Paddle's.
    translated = paddle_environment(env, is_collective)
    if translated is not None:
        return PaddleCloudRoleMaker(is_collective=is_collective, environ={**env, **translated})
    asked = [f"{k}={v}" for k, v in counts.items() if v != "1"]
    if asked:
        raise InvalidArgument(
            f"fleet.init(): {', '.join(asked)} asks for more than one worker, but this process "
            f"has no launcher environment ({TRAINER_ENDPOINTS}, {TRAINING_ROLE}, "
            f"{TRAINER_ID} ... are unset): start the job with `fleetrun --worker_num=N "
            "script.py`; run as one process it would train alone"
        )
    logger.warning(
        "fleet.init(): no launcher environment (%s, %s unset): running this script as a "
        "one-worker job; launch it with fleetrun for more workers",
        TRAINER_ENDPOINTS,
        TRAINING_ROLE,
    )
    alone = UserDefinedRoleMaker(
        current_id=0, role=Role.WORKER, worker_num=1, is_collective=is_collective
    )
    alone.metrics_port = metrics_port_of(env)
    return alone


def metrics_port_of(env: Mapping[str, str]) -> Optional[int]:
    """FLEET_METRICS_PORT as a port, None when unset; InvalidArgument naming it otherwise."""
    if not env.get(METRICS_PORT, "").strip():
        return None
    port = _require_int(env, METRICS_PORT, 1)
    if port > 65535:
        raise InvalidArgument(f"{METRICS_PORT}={port} is not a port (1..65535)")
    return port


def job_id_of(env: Mapping[str, str]) -> Optional[str]:
    """The job identity set in `env` (FLEET_JOB_ID, else a cluster manager's job id), or None."""
    for name in (JOB_ID, *CLUSTER_JOB_ID_VARS):
        value = env.get(name, "").strip()
        if value:
            return value if name == JOB_ID else f"{name}={value}"
    return None


def derived_job_id(
    server_endpoints: Sequence[str],
    worker_num: int,
    worker_endpoints: Sequence[str],
    gloo: GlooConfig,
) -> str:
    """The identity of a job that was given none: a digest of what all its processes share."""
    facts = "|".join(
        [",".join(server_endpoints), str(worker_num), ",".join(worker_endpoints)]
        + [gloo.store_endpoint or "", gloo.store_path or ""]
    )
    return "endpoints-" + hashlib.sha1(facts.encode()).hexdigest()[:12]


def _require(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise InvalidArgument(f"{name} is not set")
    return value


def _require_int(env: Mapping[str, str], name: str, minimum: int) -> int:
    text = _require(env, name)
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgument(f"{name}={text!r} is not an integer") from None
    if value < minimum:
        raise InvalidArgument(f"{name}={value} is below {minimum}")
    return value


def _parse_ps(env: Mapping[str, str]) -> dict:
    role_name = _require(env, TRAINING_ROLE).upper()
    if role_name not in ("PSERVER", "TRAINER"):
        raise InvalidArgument(f"{TRAINING_ROLE}={role_name!r} is neither PSERVER nor TRAINER")
    servers = parse_endpoint_list(_require(env, PSERVERS), PSERVERS)
    worker_num = _require_int(env, TRAINERS_NUM, 1)
    workers = parse_endpoint_list(env.get(TRAINER_ENDPOINTS, ""), TRAINER_ENDPOINTS)
    if workers and len(workers) != worker_num:
        raise InvalidArgument(
            f"{TRAINER_ENDPOINTS} has {len(workers)} entries but {TRAINERS_NUM}={worker_num}"
        )
    if role_name == "PSERVER":
        own = f"{_require(env, POD_IP)}:{_require_int(env, PADDLE_PORT, 1)}"
        if own not in servers:
            raise InvalidArgument(
                f"this server's endpoint {POD_IP}:{PADDLE_PORT} = {own} is not in {PSERVERS}"
            )
        role, current_id, hostname = Role.SERVER, servers.index(own), env[POD_IP].strip()
    else:
        current_id = _require_int(env, TRAINER_ID, 0)
        if current_id >= worker_num:
            raise InvalidArgument(
                f"{TRAINER_ID}={current_id} is not below {TRAINERS_NUM}={worker_num}"
            )
        role, hostname = Role.WORKER, _worker_hostname(env, workers, current_id)
    return dict(
        role=role,
        current_id=current_id,
        worker_num=worker_num,
        server_endpoints=servers,
        worker_endpoints=workers,
        hostname=hostname,
    )


def _parse_collective(env: Mapping[str, str]) -> dict:
    workers = parse_endpoint_list(_require(env, TRAINER_ENDPOINTS), TRAINER_ENDPOINTS)
    current_id = _require_int(env, TRAINER_ID, 0)
    if current_id >= len(workers):
        raise InvalidArgument(
            f"{TRAINER_ID}={current_id} is outside the {len(workers)} "
            f"entries of {TRAINER_ENDPOINTS}"
        )
    if env.get(TRAINERS_NUM, "").strip() and _require_int(env, TRAINERS_NUM, 1) != len(workers):
        raise InvalidArgument(
            f"{TRAINERS_NUM}={env[TRAINERS_NUM]} but {TRAINER_ENDPOINTS} has {len(workers)} entries"
        )
    current = _require(env, CURRENT_ENDPOINT)
    if current != workers[current_id]:
        raise InvalidArgument(
            f"{CURRENT_ENDPOINT}={current} is not entry {current_id} of "
            f"{TRAINER_ENDPOINTS} ({workers[current_id]})"
        )
    return dict(
        role=Role.WORKER,
        current_id=current_id,
        worker_num=len(workers),
        server_endpoints=[],
        worker_endpoints=workers,
        hostname=parse_endpoint(current, CURRENT_ENDPOINT)[0],
    )


def _worker_hostname(env: Mapping[str, str], workers: list[str], index: int) -> str:
    """This worker's address: POD_IP, else its own endpoint's host, else loopback."""
    if env.get(POD_IP, "").strip():
        return env[POD_IP].strip()
    if env.get(CURRENT_ENDPOINT, "").strip():
        return parse_endpoint(env[CURRENT_ENDPOINT].strip(), CURRENT_ENDPOINT)[0]
    if workers:
        return parse_endpoint(workers[index], TRAINER_ENDPOINTS)[0]
    return "127.0.0.1"


def _parse_gloo(env: Mapping[str, str], hostname: str) -> GlooConfig:
    return GlooConfig(
        store_endpoint=env.get(GLOO_STORE_ENDPOINT, "").strip() or None,
        store_path=env.get(GLOO_STORE_PATH, "").strip() or None,
        hostname=hostname,
        timeout_s=_seconds(env, GLOO_TIMEOUT, GlooConfig.timeout_s),
        collective_timeout_s=_seconds(
            env, GLOO_COLLECTIVE_TIMEOUT, GlooConfig.collective_timeout_s
        ),
    )


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    if not env.get(name, "").strip():
        return default
    try:
        value = float(env[name])
    except ValueError:
        raise InvalidArgument(f"{name}={env[name]!r} is not a number of seconds") from None
    if not value > 0:
        raise InvalidArgument(f"{name}={env[name]!r} must be a positive number of seconds")
    return value


__all__ = [
    "GlooConfig",
    "PaddleCloudRoleMaker",
    "Role",
    "RoleMakerBase",
    "UserDefinedCollectiveRoleMaker",
    "UserDefinedRoleMaker",
    "is_launched",
    "role_from_environment",
]
