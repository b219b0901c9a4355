"""The libFuzzer targets of tests/fuzz (MultiSlot parser, TCP store frame handler, PS request
handlers, PS checkpoint readers), built with
ASan + UBSan into build/fuzz and run for a few seconds each from their committed seed corpora.
A longer run on demand: bash tests/fuzz/run_fuzz.sh 3600."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

REPO_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
SECONDS_PER_TARGET = int(os.environ.get("FLEET_FUZZ_SECONDS", "4"))


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    shutil.which("clang++") is None, reason="clang++ missing (scripts/setup_env.sh installs it)"
)
def test_fuzz_targets_run_clean_from_their_seeds():
    result = subprocess.run(
        ["bash", os.path.join(REPO_ROOT, "tests", "fuzz", "run_fuzz.sh"), str(SECONDS_PER_TARGET)],
        capture_output=True,
        text=True,
        timeout=840,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    runs = dict(re.findall(r"fuzz (\w+): (\d+) executions", result.stdout))
    assert set(runs) == {
        "multislot_parser_fuzz",
        "tcp_store_frame_fuzz",
        "ps_service_fuzz",
        "ps_checkpoint_fuzz",
    }, result.stdout
    # The checkpoint target writes and reads a file per input: a few hundred a second.
    least = {"ps_checkpoint_fuzz": 200}
    for target, count in runs.items():
        assert int(count) > least.get(target, 1000), f"{target} ran only {count} inputs"
