"""A cluster manager's environment told in Paddle's variables, for fleet.init() without fleetrun.

Under `srun python train.py` (Slurm) or `mpirun python train.py` (Open MPI) no launcher sets
Paddle's variables; each process knows only the manager's: its rank, the number of tasks and
where they run. paddle_environment() derives from those the variables PaddleCloudRoleMaker reads
(fleet.role_maker), the same for every process of the job, so that they agree on the endpoints:

  Slurm      SLURM_PROCID (rank), SLURM_STEP_NUM_TASKS (or SLURM_NTASKS), SLURM_STEP_NODELIST
             (compressed host list, e.g. "node[01-03,07],gpu5"; srun sets it, so a script run
             directly in an sbatch allocation is not taken for a task), SLURM_STEP_TASKS_PER_NODE
             (or SLURM_TASKS_PER_NODE; e.g. "2(x3),1"), SLURM_LOCALID (rank on its node). Tasks
             are placed as srun's default block distribution does: the first node's tasks first.
  Open MPI   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK,
             OMPI_COMM_WORLD_LOCAL_SIZE, and FLEET_HOSTS (set by the user, passed with
             `mpirun -x FLEET_HOSTS`): the hosts in the order of the host file, each with the
             same number of ranks, placed by slot (mpirun's default). MPI tells a process nothing
             of where the other ranks run, hence FLEET_HOSTS.

Endpoints: the task with local rank j on host h is h:FLEET_PORT+j (FLEET_PORT, default 6170,
like fleetrun's --started_port); worker 0's host also serves the rendezvous store on the next
port, FLEET_PORT + (number of tasks on that host).

Parameter-server jobs: FLEET_SERVER_NUM=N (required) makes ranks 0..N-1 the servers (server i
is rank i) and the other ranks the workers (worker i is rank N+i). So `srun --ntasks=4
--nodes=3 --distribution=block` with one task on each of the first two nodes and FLEET_SERVER_NUM=2
puts a server on each of those nodes and both workers on the third.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Mapping, Optional

from fleet.errors import InvalidArgument

PORT = "FLEET_PORT"
DEFAULT_PORT = 6170
SERVER_NUM = "FLEET_SERVER_NUM"
HOSTS = "FLEET_HOSTS"


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where every task of the job runs: host_of[r] is rank r's host, local_of[r] its rank on
    that host; `source` names the manager's variables, for messages."""

    rank: int
    host_of: list[str]
    local_of: list[int]
    source: str


def started_by_a_manager(env: Mapping[str, str]) -> bool:
    """Whether srun or mpirun started this process (paddle_environment then applies)."""
    return bool(
        (env.get("SLURM_PROCID", "").strip() and env.get("SLURM_STEP_NODELIST", "").strip())
        or env.get("OMPI_COMM_WORLD_RANK", "").strip()
    )


def paddle_environment(env: Mapping[str, str], is_collective: bool) -> Optional[dict[str, str]]:
    """Paddle's variables for this process from Slurm's or Open MPI's, or None when neither
    manager started it. Raises InvalidArgument naming the variable at fault."""
    layout = slurm_layout(env) or ompi_layout(env)
    if layout is None:
        return None
    base = _int(env, PORT, DEFAULT_PORT, 1)
    endpoints = [f"{h}:{base + j}" for h, j in zip(layout.host_of, layout.local_of)]
    if len(set(endpoints)) != len(endpoints):
        raise InvalidArgument(f"{layout.source}: two tasks have the same host and local rank")
    if is_collective:
        servers, workers, first_worker = [], endpoints, 0
    else:
        if not env.get(SERVER_NUM, "").strip():
            raise InvalidArgument(
                f"{layout.source}: a parameter-server job needs {SERVER_NUM}=N (ranks 0..N-1 "
                "are the servers, the others the workers)"
            )
        count = _int(env, SERVER_NUM, 0, 1)
        if count >= len(endpoints):
            raise InvalidArgument(
                f"{SERVER_NUM}={count} leaves no worker among the job's {len(endpoints)} tasks"
            )
        servers, workers, first_worker = endpoints[:count], endpoints[count:], count
    store_host = layout.host_of[first_worker]
    store_port = base + sum(h == store_host for h in layout.host_of)
    own_host, own_port = layout.host_of[layout.rank], base + layout.local_of[layout.rank]
    out = {
        "PADDLE_TRAINER_ENDPOINTS": ",".join(workers),
        "PADDLE_TRAINERS_NUM": str(len(workers)),
        "POD_IP": own_host,
        "PADDLE_PORT": str(own_port),
        "FLEET_GLOO_STORE_ENDPOINT": f"{store_host}:{store_port}",
    }
    if servers:
        out["PADDLE_PSERVERS_IP_PORT_LIST"] = ",".join(servers)
    is_server = layout.rank < len(servers)
    out["TRAINING_ROLE"] = "PSERVER" if is_server else "TRAINER"
    if not is_server:
        out["PADDLE_TRAINER_ID"] = str(layout.rank - len(servers))
        out["PADDLE_CURRENT_ENDPOINT"] = endpoints[layout.rank]
    return out


def slurm_layout(env: Mapping[str, str]) -> Optional[Layout]:
    """The tasks of an srun step. Only srun sets the SLURM_STEP_* variables: a script run
    directly in an sbatch/salloc allocation (SLURM_PROCID=0 there too) is not a task of a step
    and trains alone."""
    if not env.get("SLURM_PROCID", "").strip() or not env.get("SLURM_STEP_NODELIST", "").strip():
        return None
    nodes_var = "SLURM_STEP_NODELIST"
    tasks_var = (
        "SLURM_STEP_TASKS_PER_NODE"
        if env.get("SLURM_STEP_TASKS_PER_NODE")
        else "SLURM_TASKS_PER_NODE"
    )
    size_var = "SLURM_STEP_NUM_TASKS" if env.get("SLURM_STEP_NUM_TASKS") else "SLURM_NTASKS"
    nodes = expand_nodelist(_str(env, nodes_var))
    tasks = expand_tasks_per_node(_str(env, tasks_var))
    size = _int(env, size_var, None, 1)
    if len(tasks) != len(nodes) or sum(tasks) != size:
        raise InvalidArgument(
            f"{tasks_var}={env[tasks_var]} does not place {size_var}={size} tasks on the "
            f"{len(nodes)} nodes of {nodes_var}={env[nodes_var]}"
        )
    host_of = [n for n, k in zip(nodes, tasks) for _ in range(k)]
    local_of = [j for k in tasks for j in range(k)]
    rank = _int(env, "SLURM_PROCID", None, 0)
    if rank >= size:
        raise InvalidArgument(f"SLURM_PROCID={rank} is not below {size_var}={size}")
    local = env.get("SLURM_LOCALID", "").strip()
    if local and int(local) != local_of[rank]:
        raise InvalidArgument(
            f"SLURM_LOCALID={local} but task {rank} of a block distribution is task "
            f"{local_of[rank]} of its node; hint: srun --distribution=block (the default)"
        )
    return Layout(rank, host_of, local_of, "Slurm (SLURM_PROCID)")


def ompi_layout(env: Mapping[str, str]) -> Optional[Layout]:
    if not env.get("OMPI_COMM_WORLD_RANK", "").strip():
        return None
    rank = _int(env, "OMPI_COMM_WORLD_RANK", None, 0)
    size = _int(env, "OMPI_COMM_WORLD_SIZE", None, 1)
    per_host = _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", None, 1)
    hosts = [h.strip() for h in env.get(HOSTS, "").split(",") if h.strip()]
    if not hosts:
        raise InvalidArgument(
            f"Open MPI (OMPI_COMM_WORLD_RANK) does not say where the other ranks run: set "
            f"{HOSTS}=host1,host2,... in the order of the host file and pass it with "
            f"`mpirun -x {HOSTS}`"
        )
    if len(hosts) * per_host != size:
        raise InvalidArgument(
            f"{HOSTS} lists {len(hosts)} hosts with OMPI_COMM_WORLD_LOCAL_SIZE={per_host} "
            f"ranks each, but OMPI_COMM_WORLD_SIZE={size}; hint: the same number of slots "
            "on every host"
        )
    local = _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", None, 0)
    if rank >= size or local != rank % per_host:
        raise InvalidArgument(
            f"OMPI_COMM_WORLD_RANK={rank}, OMPI_COMM_WORLD_LOCAL_RANK={local}: ranks are not "
            "placed by slot; hint: mpirun --map-by slot (the default)"
        )
    host_of = [hosts[r // per_host] for r in range(size)]
    local_of = [r % per_host for r in range(size)]
    return Layout(rank, host_of, local_of, "Open MPI (OMPI_COMM_WORLD_RANK)")


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_nodelist(text: str) -> list[str]:
    """Slurm's compressed host list: "node[01-03,07],gpu5" -> node01 node02 node03 node07 gpu5
    (zero padding kept; several bracket groups in one name expand as a product)."""
    names, depth, start = [], 0, 0
    for i, ch in enumerate(text + ","):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            if text[start:i].strip():
                names.extend(_expand_name(text[start:i].strip(), text))
            start = i + 1
        if depth < 0 or depth > 1:
            raise InvalidArgument(f"bad Slurm host list {text!r}: unbalanced brackets")
    if depth != 0 or not names:
        raise InvalidArgument(f"bad Slurm host list {text!r}")
    return names


def _expand_name(name: str, whole: str) -> list[str]:
    open_at = name.find("[")
    if open_at < 0:
        return [name]
    close_at = name.index("]", open_at)
    head, body, tail = name[:open_at], name[open_at + 1 : close_at], name[close_at + 1 :]
    out = []
    for part in body.split(","):
        m = _RANGE.match(part.strip())
        if not m:
            raise InvalidArgument(f"bad range {part!r} in Slurm host list {whole!r}")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise InvalidArgument(f"bad range {part!r} in Slurm host list {whole!r}")
        for n in range(int(lo), int(hi) + 1):
            out.extend(head + str(n).zfill(len(lo)) + rest for rest in _expand_name(tail, whole))
    return out


_TASKS = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def expand_tasks_per_node(text: str) -> list[int]:
    """Slurm's tasks per node: "2(x3),1" -> [2, 2, 2, 1]."""
    out = []
    for part in text.split(","):
        m = _TASKS.match(part.strip())
        if not m:
            raise InvalidArgument(f"bad Slurm tasks per node {text!r} (at {part!r})")
        out.extend([int(m.group(1))] * int(m.group(2) or 1))
    return out


def _str(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise InvalidArgument(f"{name} is not set")
    return value


def _int(env: Mapping[str, str], name: str, default: Optional[int], minimum: int) -> int:
    text = env.get(name, "").strip()
    if not text:
        if default is None:
            raise InvalidArgument(f"{name} is not set")
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgument(f"{name}={text!r} is not an integer") from None
    if value < minimum:
        raise InvalidArgument(f"{name}={value} is below {minimum}")
    return value
