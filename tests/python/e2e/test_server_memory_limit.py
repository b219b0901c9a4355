"""The dense-table size check honours the process's address-space limit (issue 29): under
`ulimit -v`, a dense table larger than what the limit leaves is refused before anything is
allocated, with an error naming the table and the limit, even when the machine has the memory."""

from __future__ import annotations

import subprocess
import sys

from tests.python.e2e.launch_helpers import REPO_ROOT

SCRIPT = """
import resource, sys
from fleet.ps import server_config, start_server
from fleet.testing.ps_reference import OPTIMIZERS

with open("/proc/self/status") as f:
    vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
limit = vm + (2 << 30)  # 2 GiB of address space left
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
table = {"table_id": 1, "name": "wide", "type": "DENSE", "dim": 2**31,  # 8 GiB
         "optimizer": OPTIMIZERS["sgd"]}
try:
    start_server(server_config(0, 1, [table]))
except Exception as e:  # OutOfMemory (a MemoryError) where ResourceExhausted maps to it
    print(type(e).__name__, e)
    sys.exit(3)
print("started")
"""


def test_a_dense_table_beyond_the_address_space_limit_is_refused_naming_both():
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 3, result.stdout + result.stderr
    assert "dense table 1 'wide'" in result.stdout, result.stdout
    assert "RLIMIT_AS" in result.stdout, result.stdout
