"""Shared test settings: where the real public data lives, and one BLAS thread per test process
(pytest-xdist already runs one process per core)."""

import os
import pathlib

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
# ../shared/data beside the checkout, as on the developers' machines and in CI.
SHARED_DATA = pathlib.Path(
    os.environ.get("FLEET_SHARED_DATA", REPO_ROOT.parent / "shared" / "data")
)
