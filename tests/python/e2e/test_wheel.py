"""The repaired wheel, as a user gets it: scripts/build_wheel.sh builds it (FLEET_WITH_CUDA=OFF,
auditwheel), it installs into a fresh virtual environment, every library its _core loads outside
the manylinux policy's system set resolves inside the installed package, and fleet works from
outside the source tree: a short training step, a Gloo all-reduce, a parameter-server pull,
fleetrun, and `python -m fleet.run_check` of the installed package.

Slow: the build reuses the developer build's ccache entries (build/wheel compiles with the same
lines as build/dev), so it recompiles the few files that depend on FLEET_WITH_CUDA and relinks;
pip then installs NumPy and protobuf into the fresh environment."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.python.conftest import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

# Always part of glibc itself, on every Linux: ldd lists them, no policy names them.
LOADER = {"linux-vdso.so.1", "ld-linux-x86-64.so.2"}

USER_SCRIPT = textwrap.dedent("""\
    import importlib.metadata, json, sys, threading
    import numpy as np
    import fleet
    from fleet import _core, layers
    from fleet.ps import PsClient, server_config, start_server

    # A tiny fc classifier, a few Executor.run steps.
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = layers.data("x", [4], dtype="float32")
        label = layers.data("label", [1], dtype="int64")
        prob = layers.fc(layers.fc(x, 8, act="relu"), 2, act="softmax")
        loss = layers.mean(layers.cross_entropy(prob, label))
        fleet.optimizer.SGD(0.5).minimize(loss)
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(startup)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((64, 4)).astype(np.float32)
    labels = (xs[:, :1] > 0).astype(np.int64)
    losses = [exe.run(main, feed={"x": xs, "label": labels}, fetch_list=[loss])[0].item()
              for _ in range(20)]

    # Gloo (bundled libgloo): two ranks as threads over an in-memory store.
    store, sums = _core.MemoryStore(), {}
    def rank(r):
        group = _core.GlooGroup.connect(store, r, 2, timeout_s=30)
        sums[r] = group.all_reduce(np.full(3, r + 1.0, np.float32), timeout_s=30).tolist()
    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]

    # gRPC (bundled libgrpc): a parameter server in this process and a pull through a client.
    server = start_server(server_config(0, 1, [{"table_id": 1, "type": "SPARSE", "dim": 4,
                                                "optimizer": {"learning_rate": 0.1, "sgd": {}}}]))
    rows = PsClient([server.endpoint]).pull_sparse(1, np.array([7, 2**40], np.int64))
    server.shutdown(1.0)

    print(json.dumps(dict(
        file=fleet.__file__, version=fleet.__version__,
        metadata_version=importlib.metadata.version("fleet"),
        cuda=_core.compiled_with_cuda, echo=hasattr(_core.ps, "EchoServer"),
        losses=losses, sums=sums, rows_shape=list(rows.shape))))
    """)


def run(args, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    assert proc.returncode == 0, (
        f"{args} exited with {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


def user_env() -> dict:
    """The environment of a user's shell: nothing pointing into the source tree."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def build_and_install(work: Path) -> Path:
    """Builds the repaired wheel into `work`/dist and installs it into `work`/venv."""
    built = run(
        ["bash", REPO_ROOT / "scripts" / "build_wheel.sh", "--out", work / "dist"],
        cwd=REPO_ROOT,
        timeout=1500,
    )
    wheel = Path(built.stdout.strip().splitlines()[-1])
    assert wheel.is_file(), built.stdout
    venv = work / "venv"
    run([sys.executable, "-m", "venv", venv], timeout=120)
    run(
        [
            venv / "bin" / "python",
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            wheel,
        ],
        timeout=600,
        env=user_env(),
    )
    return wheel


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    """(wheel, venv, work dir) once the repaired wheel is built and installed: once per test
    run, also under pytest-xdist, whose workers share the directory (the first builds under a
    lock, the others wait for it and reuse the result)."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    base = tmp_path_factory.getbasetemp()
    work = (base.parent / f"fleet-wheel-{run_id}") if run_id else (base / "fleet-wheel")
    work.mkdir(exist_ok=True)
    done = work / "wheel.txt"
    with open(work / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # bounded by the test's timeout
        if not done.exists():
            done.write_text(str(build_and_install(work)))
    return Path(done.read_text()), work / "venv", work


def policy_libs(wheel: Path) -> set:
    """The system libraries the wheel's manylinux tag allows (auditwheel's own policy list)."""
    import auditwheel

    tag = wheel.name.rsplit("-", 1)[1].removesuffix(".whl")
    policy_file = Path(auditwheel.__file__).parent / "policy" / "manylinux-policy.json"
    for policy in json.loads(policy_file.read_text()):
        names = {f"{policy['name']}_x86_64"} | {f"{a}_x86_64" for a in policy["aliases"]}
        if tag in names:
            return set(policy["lib_whitelist"]) | LOADER
    raise AssertionError(f"no manylinux policy for tag {tag}")


def test_wheel_contents(installed):
    wheel, _, _ = installed
    assert "manylinux" in wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    bundled = [n for n in names if n.startswith("fleet.libs/") and ".so" in n]
    assert any("libgrpc" in n for n in bundled) and any("libopenblas" in n for n in bundled)
    assert any("libprotobuf" in n for n in bundled) and any("libgloo" in n for n in bundled)
    # The benchmarks' module and generated peers stay out of the package.
    assert not [n for n in names if "bench" in n or n.startswith("benchmarks/")]
    assert "fleet/version.py" in names and "fleet/proto/ps_pb2.py" in names


def test_core_loads_only_policy_libraries_from_the_system(installed):
    wheel, venv, _ = installed
    site = run(
        [
            venv / "bin" / "python",
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['platlib'])",
        ],
        env=user_env(),
    ).stdout.strip()
    core = next(Path(site, "fleet").glob("_core*.so"))
    libs_dir = Path(site, "fleet.libs").resolve()
    allowed = policy_libs(wheel)
    lines = run(["ldd", core], env=user_env()).stdout.splitlines()
    seen, outside = 0, []
    for line in lines:
        name, _, rest = line.strip().partition(" => ")
        name = Path(name.split()[0]).name  # the loader is listed by its path
        if "not found" in rest:
            outside.append(line.strip())
            continue
        path = rest.split(" (")[0].strip() if rest else name
        if name in allowed:
            continue
        seen += 1
        if not Path(path).resolve().is_relative_to(libs_dir):
            outside.append(line.strip())
    assert seen >= 20  # gRPC, protobuf, abseil, Gloo, OpenBLAS and theirs, all from fleet.libs
    assert outside == [], "loaded from outside the package:\n" + "\n".join(outside)


def test_fleet_trains_from_outside_the_source_tree(installed):
    wheel, venv, work = installed
    script = work / "user_script.py"
    script.write_text(USER_SCRIPT)
    out = run([venv / "bin" / "python", script], cwd=work, env=user_env(), timeout=300)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert Path(seen["file"]).resolve().is_relative_to(venv.resolve())
    assert seen["version"] == seen["metadata_version"] == wheel.name.split("-")[1]
    assert seen["cuda"] is False and seen["echo"] is False
    assert seen["losses"][-1] < 0.7 * seen["losses"][0]
    assert seen["sums"] == {"0": [3.0, 3.0, 3.0], "1": [3.0, 3.0, 3.0]}
    assert seen["rows_shape"] == [2, 4]


def test_fleetrun_of_the_wheel(installed):
    wheel, venv, work = installed
    help_text = run(
        [venv / "bin" / "fleetrun", "--help"], cwd=work, env=user_env(), timeout=60
    ).stdout
    assert "--server_num" in help_text and "--collective" in help_text
    version = run(
        [venv / "bin" / "fleetrun", "--version"], cwd=work, env=user_env(), timeout=60
    ).stdout
    assert version.strip() == f"fleetrun (Fleet) {wheel.name.split('-')[1]}"


def test_run_check_of_the_wheel(installed):
    """The installed package's own check: training, a fleetrun PS job, a collective job."""
    _, venv, work = installed
    out = run(
        [venv / "bin" / "python", "-m", "fleet.run_check"], cwd=work, env=user_env(), timeout=300
    ).stdout
    assert "CUDA compiled in: no (CPU build)" in out
    assert f"{Path(venv).name}/" in out.split("BLAS: ", 1)[1].splitlines()[0]  # bundled OpenBLAS
    assert out.strip().splitlines()[-1].startswith("Fleet works here"), out
