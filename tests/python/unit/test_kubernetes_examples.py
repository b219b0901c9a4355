"""examples/kubernetes: each pod of the plain Indexed Job manifests gets an environment that
PaddleCloudRoleMaker accepts, and together the pods make one job (every index its own role and
rank, the same endpoint lists). The PaddleJob manifests' rendezvous is exercised by
tests/python/e2e/test_cluster_managers.py (the operator's environment replayed)."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from fleet.role_maker import PaddleCloudRoleMaker, Role

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples" / "kubernetes"


def _pod_environments(path: pathlib.Path) -> list[dict[str, str]]:
    """The environment of every pod of every Indexed Job in the file, $(INDEX) substituted as
    Kubernetes does (INDEX comes from the job-completion-index annotation)."""
    pods = []
    for doc in yaml.safe_load_all(path.read_text()):
        if doc["kind"] != "Job":
            continue
        assert doc["spec"]["completionMode"] == "Indexed"
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        for index in range(doc["spec"]["completions"]):
            env = {}
            for var in container["env"]:
                if "value" in var:
                    env[var["name"]] = str(var["value"]).replace("$(INDEX)", str(index))
                else:
                    env[var["name"]] = str(index)  # INDEX itself
            pods.append(env)
    return pods


@pytest.mark.parametrize(
    "name, collective, servers, workers",
    [("job-collective.yaml", True, 0, 4), ("job-ps.yaml", False, 2, 2)],
)
def test_indexed_job_pods_make_one_job(name, collective, servers, workers):
    roles = [
        PaddleCloudRoleMaker(is_collective=collective, environ=env)
        for env in _pod_environments(EXAMPLES / name)
    ]
    seen = sorted((r.role, r.server_index() if r.is_server() else r.worker_index()) for r in roles)
    assert seen == sorted(
        [(Role.SERVER, i) for i in range(servers)] + [(Role.WORKER, i) for i in range(workers)]
    )
    assert len({(tuple(r.server_endpoints()), tuple(r.worker_endpoints())) for r in roles}) == 1
    assert len({r.job_id for r in roles}) == 1  # FLEET_JOB_ID, the same on every pod
