"""fleetrun's command line: every option documented with an example, checked for conflicts."""

from __future__ import annotations

import argparse
import importlib.util
import os
from typing import Optional, Sequence

from fleet import _core
from fleet._endpoints import parse_endpoint_list
from fleet.errors import InvalidArgument
from fleet.version import __version__

_DESCRIPTION = """\
Start the processes of a Fleet job on this machine and supervise them.

Parameter-server mode (servers hold the parameters, workers train):
  fleetrun --server_num=2 --worker_num=2 train.py --epochs 3
  fleetrun --servers=10.0.0.1:6170,10.0.0.2:6170 --workers=10.0.0.1:6171,10.0.0.2:6171 \\
           --store_port=6180 train.py        (run the same command on both machines)
  fleetrun --server_num=1 --worker_num=2 --module fleet.rec.static_ps_trainer -m config.yaml
                                             (a module, with the arguments after its name)
Collective mode (every process is a worker holding all parameters):
  fleetrun --gpus=0,1 train.py               (one process per GPU)
  fleetrun --ips=10.0.0.1,10.0.0.2 --gpus=0,1 train.py   (on each machine)
  fleetrun --collective --nproc_per_node=4 train.py      (CPU, Gloo all-reduce)

Each process gets the PaddlePaddle-style environment that fleet.init() reads
(TRAINING_ROLE, PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ID,
POD_IP, PADDLE_PORT, PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT, and
FLEET_GLOO_STORE_ENDPOINT for fleet.util). If a process exits non-zero, the others are stopped
(SIGTERM, then SIGKILL after --grace_period), the tail of its output is printed and fleetrun
exits non-zero. When every worker has finished, the servers are stopped and fleetrun exits 0.
SIGTERM or Ctrl-C to fleetrun stops the whole job.

Each job has an identity, carried by every call to its servers and rendezvous store, so that a
job started on another job's ports is refused instead of training into it: fleetrun makes a fresh
FLEET_JOB_ID for a job on one machine; for a job over several machines set the same FLEET_JOB_ID
on each (a cluster manager's PADDLE_JOB_ID or SLURM_JOB_ID also serves), or the processes derive
one from the job's endpoints.
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fleetrun",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_ps_options(p)
    _add_collective_options(p)
    _add_common_options(p)
    _add_script_arguments(p)
    return p


def _add_ps_options(p: argparse.ArgumentParser) -> None:
    """How many servers and workers, or which, in a parameter-server job."""
    ps = p.add_argument_group("parameter-server mode")
    ps.add_argument(
        "--server_num",
        type=int,
        default=None,
        metavar="N",
        help="number of servers on this machine, on free ports (e.g. --server_num=2)",
    )
    ps.add_argument(
        "--worker_num",
        type=int,
        default=None,
        metavar="N",
        help="number of workers on this machine (e.g. --worker_num=2)",
    )
    ps.add_argument(
        "--servers",
        default="",
        metavar="IP:PORT,...",
        help="every server of the job, across machines; this machine starts those "
        "whose IP is its own (e.g. --servers=10.0.0.1:6170,10.0.0.2:6170)",
    )
    ps.add_argument(
        "--workers",
        default="",
        metavar="IP:PORT,...",
        help="every worker of the job, across machines; worker i is the i-th entry "
        "(e.g. --workers=10.0.0.1:6171,10.0.0.2:6171)",
    )


def _add_collective_options(p: argparse.ArgumentParser) -> None:
    """Processes, GPUs and machines of a collective job."""
    co = p.add_argument_group("collective mode")
    co.add_argument(
        "--collective",
        action="store_true",
        help="collective job: every process is a worker (implied by --gpus and "
        "--ips; e.g. --collective --nproc_per_node=4)",
    )
    co.add_argument(
        "--gpus",
        default="",
        metavar="ID,...",
        help="GPUs to use, one process each; a process sees only its GPU "
        "(CUDA_VISIBLE_DEVICES=<id>, FLAGS_selected_gpus=0) (e.g. --gpus=0,1)",
    )
    co.add_argument(
        "--nproc_per_node",
        type=int,
        default=None,
        metavar="N",
        help="processes per machine; defaults to the number of --gpus, else 1 "
        "(e.g. --nproc_per_node=4)",
    )
    co.add_argument(
        "--ips",
        default="",
        metavar="IP,...",
        help="the machines of a multi-machine job, each running fleetrun with the "
        "same options (e.g. --ips=10.0.0.1,10.0.0.2)",
    )
    co.add_argument(
        "--started_port",
        type=int,
        default=6170,
        metavar="PORT",
        help="first trainer port on each machine of a multi-machine collective job; "
        "one-machine jobs pick free ports (e.g. --started_port=6170)",
    )


def _add_common_options(p: argparse.ArgumentParser) -> None:
    """The rendezvous store, logs, stopping and restarting, for either kind of job."""
    common = p.add_argument_group("common")
    common.add_argument(
        "--version",
        action="version",
        version=f"fleetrun (Fleet) {__version__}",
        help="print Fleet's version and exit",
    )
    common.add_argument(
        "--host",
        default=None,
        metavar="IP",
        help="this machine's IP as written in --servers/--workers/--ips, when it "
        "cannot be matched automatically; POD_IP serves when --host is not given; it must "
        "be an address of this machine (e.g. --host=10.0.0.1)",
    )
    common.add_argument(
        "--store_port",
        type=int,
        default=None,
        metavar="PORT",
        help="port of the rendezvous store for fleet.util, served by worker 0 on "
        "its machine; needed for multi-machine parameter-server jobs unless "
        "FLEET_GLOO_STORE_PATH names a shared directory (e.g. "
        "--store_port=6180)",
    )
    common.add_argument(
        "--log_dir",
        default=None,
        metavar="DIR",
        help="write each process's output to DIR/serverlog.N and DIR/workerlog.N "
        "instead of the console (e.g. --log_dir=./logs)",
    )
    common.add_argument(
        "--grace_period",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="time a stopped process gets between SIGTERM and SIGKILL (e.g. --grace_period=10)",
    )
    common.add_argument(
        "--host_timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="parameter-server jobs over several machines: how long a machine running only "
        "servers waits for the workers' machines to come up (their fleetrun started) before "
        "it ends the job naming them; once they were up, it ends the job within seconds of "
        "every worker being gone (e.g. --host_timeout=600)",
    )
    common.add_argument(
        "--log_tail",
        type=int,
        default=50,
        metavar="LINES",
        help="lines of a failed process's output to print (e.g. --log_tail=100)",
    )
    common.add_argument(
        "--max_restarts",
        type=int,
        default=0,
        metavar="N",
        help="when a process fails, stop the job and start it again, at most N times, each "
        "restart logged with its cause; with --checkpoint_dir the processes get "
        "FLEET_RESTART_CHECKPOINT (fleet.restart_checkpoint()) naming it once it holds a "
        "complete save, for the script to resume with fleet.init_server(dirname) "
        "(e.g. --max_restarts=3 --checkpoint_dir=./ckpt)",
    )
    common.add_argument(
        "--metrics_port",
        type=int,
        default=None,
        metavar="BASE",
        help="serve each process's metrics in the Prometheus text format: process i of the "
        "job's launch order (servers first, then workers) on BASE+i at its own address, "
        "http://<ip>:<BASE+i>/metrics (FLEET_METRICS_PORT; e.g. --metrics_port=9100)",
    )
    common.add_argument(
        "--checkpoint_dir",
        default=None,
        metavar="DIR",
        help="where the script saves with fleet.save_persistables (see --max_restarts)",
    )


def _add_script_arguments(p: argparse.ArgumentParser) -> None:
    """What every process runs, and its arguments."""
    p.add_argument(
        "--module",
        nargs=argparse.REMAINDER,
        default=None,
        metavar="NAME ARGS",
        help="run a Python module instead of a script, with the arguments after its name "
        "(python -m NAME ARGS; torchrun's -m, spelled long because PaddleRec's trainers take "
        "-m config.yaml), e.g. --module fleet.rec.static_ps_trainer -m config.yaml",
    )
    p.add_argument(
        "training_script",
        nargs="?",
        default=None,
        help="the Python script every process runs (e.g. train.py)",
    )
    p.add_argument(
        "training_script_args",
        nargs=argparse.REMAINDER,
        help="arguments passed on to the script (e.g. train.py --epochs 3)",
    )


def _module_as_script(args: argparse.Namespace) -> None:
    """--module NAME ARGS: every process runs `python -u -m NAME ARGS`, so the plan's command
    (`python -u <training_script> <training_script_args>`) gets `-m` and `NAME ARGS` there.
    NAME must be importable here (the processes share this interpreter and environment)."""
    if args.training_script or args.training_script_args:
        raise InvalidArgument(
            "give a training script or --module NAME, not both (the arguments after "
            "--module NAME all go to the module)"
        )
    if not args.module:
        raise InvalidArgument(
            "--module needs a module name, e.g. --module fleet.rec.static_trainer"
        )
    name = args.module[0]
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise InvalidArgument(f"--module {name}: no such module importable here")
    args.training_script, args.training_script_args = "-m", list(args.module)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """Parses and checks the command line; raises InvalidArgument with a hint on a bad
    combination (argparse itself exits with usage on unknown options)."""
    args = build_parser().parse_args(argv)
    check_args(args)
    return args


def check_args(args: argparse.Namespace) -> None:
    if args.module is not None:
        _module_as_script(args)
    if not args.training_script:
        raise InvalidArgument(
            "no training script given; hint: fleetrun [options] train.py "
            "[script args], see fleetrun --help"
        )
    if args.module is None and not os.path.isfile(args.training_script):
        raise InvalidArgument(f"training script {args.training_script!r} does not exist")
    for name in ("server_num", "worker_num", "nproc_per_node"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise InvalidArgument(f"--{name}={value}: must be at least 1")
    if args.grace_period < 0 or args.log_tail < 0 or args.max_restarts < 0:
        raise InvalidArgument("--grace_period, --log_tail and --max_restarts must not be negative")
    if args.host_timeout <= 0:
        raise InvalidArgument(f"--host_timeout must be positive, got {args.host_timeout:g}")
    if args.metrics_port is not None and not 0 < args.metrics_port < 65536:
        raise InvalidArgument(f"--metrics_port={args.metrics_port} is not a port (1..65535)")
    if args.log_dir is not None:
        _check_log_dir(args.log_dir)
    ps_given = [
        f"--{n}"
        for n in ("server_num", "worker_num", "servers", "workers")
        if getattr(args, n) not in (None, "")
    ]
    collective_given = [
        f"--{n}" for n in ("gpus", "ips", "nproc_per_node") if getattr(args, n) not in (None, "")
    ]
    if args.collective:
        collective_given.insert(0, "--collective")
    if ps_given and collective_given:
        raise InvalidArgument(
            f"{', '.join(ps_given)} (parameter-server mode) cannot be combined "
            f"with {', '.join(collective_given)} (collective mode); hint: pick "
            "one mode, see fleetrun --help"
        )
    args.mode = "ps" if ps_given else "collective"
    if args.mode == "ps":
        _check_ps(args)
    else:
        _check_collective(args)


def _check_log_dir(log_dir: str) -> None:
    """Creates the log directory now, so that a bad path is an error before any process starts
    rather than a traceback halfway through starting them."""
    if os.path.exists(log_dir) and not os.path.isdir(log_dir):
        raise InvalidArgument(
            f"--log_dir={log_dir!r} is a file, not a directory; hint: give a "
            "directory (it is created if missing)"
        )
    try:
        os.makedirs(log_dir, exist_ok=True)
    except OSError as e:
        raise InvalidArgument(
            f"--log_dir={log_dir!r}: cannot create the directory: {e.strerror}"
        ) from None
    if not os.access(log_dir, os.W_OK | os.X_OK):
        raise InvalidArgument(f"--log_dir={log_dir!r}: the directory is not writable")


def check_devices(args: argparse.Namespace) -> None:
    """--gpus ids must name GPUs this machine has (as the CUDA runtime counts them). Apart from
    check_args so that plans for other machines can be built and tested anywhere."""
    gpus = list(getattr(args, "gpus", None) or [])
    if not gpus:
        return
    count = _core.cuda_device_count()
    if count == 0:
        raise InvalidArgument(
            f"--gpus={','.join(gpus)} but this machine has no usable CUDA GPU "
            "(no device, no driver, or a build without CUDA); hint: for CPU "
            "data parallelism use --collective --nproc_per_node=N"
        )
    missing = [g for g in gpus if int(g) >= count]
    if missing:
        raise InvalidArgument(
            f"--gpus={','.join(gpus)}: GPU(s) {','.join(missing)} do not exist; "
            f"this machine has {count} (ids 0..{count - 1})"
        )


def _check_count(args: argparse.Namespace, list_name: str, num_name: str) -> None:
    endpoints = parse_endpoint_list(getattr(args, list_name), f"--{list_name}")
    setattr(args, list_name, endpoints)
    num = getattr(args, num_name)
    if endpoints and num is not None and num != len(endpoints):
        raise InvalidArgument(
            f"--{list_name} lists {len(endpoints)} endpoints but "
            f"--{num_name}={num}; hint: give only --{list_name} (the count "
            "follows from it)"
        )


def _check_ps(args: argparse.Namespace) -> None:
    _check_count(args, "servers", "server_num")
    _check_count(args, "workers", "worker_num")
    if not args.servers and args.server_num is None:
        raise InvalidArgument(
            "parameter-server mode needs servers; hint: add --server_num=N or --servers=ip:port,..."
        )
    if not args.workers and args.worker_num is None:
        raise InvalidArgument(
            "parameter-server mode needs workers; hint: add --worker_num=N or --workers=ip:port,..."
        )


def _check_collective(args: argparse.Namespace) -> None:
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
    if any(not g.isdigit() for g in gpus) or len(set(gpus)) != len(gpus):
        raise InvalidArgument(f"--gpus={args.gpus!r}: expected distinct GPU ids such as 0,1")
    args.gpus = gpus
    if gpus and args.nproc_per_node is not None and args.nproc_per_node != len(gpus):
        raise InvalidArgument(
            f"--nproc_per_node={args.nproc_per_node} but --gpus lists "
            f"{len(gpus)} GPUs; hint: one process per GPU, drop "
            "--nproc_per_node"
        )
    args.nproc_per_node = args.nproc_per_node or len(gpus) or 1
    ips = [ip.strip() for ip in args.ips.split(",") if ip.strip()]
    if len(set(ips)) != len(ips):
        raise InvalidArgument(f"--ips={args.ips!r} lists a machine more than once")
    args.ips = ips
    if not 0 < args.started_port < 65536:
        raise InvalidArgument(f"--started_port={args.started_port} is not a port")
