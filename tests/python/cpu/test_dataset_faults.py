"""Hostile bytes and faulty pipe commands in a dataset pass: lines that are not UTF-8 or hold NUL
bytes (in files and from a pipe_command), a command that hangs, a command that writes nothing,
Ctrl-C in load_into_memory, and a training process killed with SIGKILL while its pipe_command
pipeline runs. Each gives an error naming the file (and line, slot or command), a warning, or
clean-up, with no process left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

import fleet
from fleet import errors, layers
from fleet.dataset import DatasetFactory

pytestmark = pytest.mark.timeout(120)

REPO_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)


def _program():
    main = fleet.Program()
    with fleet.program_guard(main, fleet.Program()):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        label = layers.data("label", [1], dtype="int64")
    return main, [ids, label]


def _dataset(files, use_vars, pipe_command="cat", kind="QueueDataset"):
    ds = DatasetFactory().create_dataset(kind)
    ds.set_use_var(use_vars)
    ds.set_batch_size(4)
    ds.set_thread(1)
    ds.set_filelist([str(f) for f in files])
    ds.set_pipe_command(pipe_command)
    return ds


def _run(kind, main, ds):
    if kind == "InMemoryDataset":
        ds.load_into_memory()
        return ds.load_stats
    result = fleet.Executor().train_from_dataset(
        main, ds, scope=fleet._core.Scope(), thread=1, print_period=0
    )
    return {"bad_lines": result.skipped_lines, "bad_line_examples": result.skipped_examples}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return members


def _wait_until(predicate, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


@pytest.mark.parametrize("kind", ["QueueDataset", "InMemoryDataset"])
@pytest.mark.parametrize("source", ["file", "pipe_command"])
def test_non_utf8_and_nul_bytes_name_file_line_and_slot(tmp_path, kind, source):
    data = tmp_path / "part-0"
    content = b"1 5 1 1\n2 7 \xff\xfe 1 0\n1 3 1 1\n1 4\x00junk 1 0\n"
    if source == "file":
        data.write_bytes(content)
        command = "cat"
    else:
        # The command writes the bad bytes itself (the file only holds a count).
        data.write_bytes(b"4\n")
        blob = tmp_path / "blob"
        blob.write_bytes(content)
        command = f"cat {blob} # reads no stdin"
    main, use_vars = _program()
    ds = _dataset([data], use_vars, command, kind)
    with pytest.raises(errors.InvalidArgument) as info:
        _run(kind, main, ds)
    message = str(info.value)
    assert f"{data}:2: slot 'ids' (#1 of 2): value 2 '\\xff\\xfe' is not an integer" in message

    ds = _dataset([data], use_vars, command, kind)
    ds.set_skip_bad_lines(True)
    stats = _run(kind, main, ds)
    assert stats["bad_lines"] == 2
    examples = stats["bad_line_examples"]
    assert "'\\xff\\xfe' is not an integer" in examples[0]
    # The NUL did not cut the message short: what follows it is there.
    assert f"{data}:4: slot 'ids' (#1 of 2): value 1 '4\\x00junk' is not an integer" in examples[1]
    if kind == "InMemoryDataset":
        assert ds.get_memory_data_size() == 2


def test_valid_utf8_in_a_bad_token_is_kept_readable(tmp_path):
    data = tmp_path / "part-0"
    data.write_text("1 größe 1 1\n", encoding="utf-8")
    main, use_vars = _program()
    with pytest.raises(errors.InvalidArgument, match="value 1 'größe' is not an integer"):
        _run("QueueDataset", main, _dataset([data], use_vars))


@pytest.mark.parametrize("kind", ["QueueDataset", "InMemoryDataset"])
def test_hanging_pipe_command_times_out_naming_file_and_command(tmp_path, kind):
    data = tmp_path / "part-0"
    data.write_text("1 5 1 1\n")
    marker = uuid.uuid4().hex[:12]
    command = f"cat; sleep 1000 # {marker}"
    main, use_vars = _program()
    ds = _dataset([data], use_vars, command, kind)
    ds.set_pipe_command_timeout(0.5)
    started = time.monotonic()
    with pytest.raises(errors.Timeout) as info:
        _run(kind, main, ds)
    assert time.monotonic() - started < 10
    assert f"pipe_command '{command}' on file '{data}' wrote nothing for 0.5 s" in str(info.value)
    assert "set_pipe_command_timeout" in str(info.value)
    with pytest.raises(errors.InvalidArgument, match="positive number of seconds"):
        ds.set_pipe_command_timeout(0)


def test_command_that_writes_nothing_for_a_non_empty_file_is_warned_about(tmp_path):
    data = tmp_path / "part-0"
    data.write_text("1 5 1 1\n" * 3)
    main, use_vars = _program()
    ds = _dataset([data], use_vars, "cat > /dev/null", "InMemoryDataset")
    with pytest.warns(RuntimeWarning, match=f"on file '{data}' wrote nothing for a file of 24"):
        ds.load_into_memory()
    assert ds.get_memory_data_size() == 0


LOADER = """
import os, signal, sys
import fleet
# A Ctrl-C in a terminal: a job started in the background by a non-interactive shell (nohup,
# `&`) inherits SIGINT ignored, and then Python raises no KeyboardInterrupt.
signal.signal(signal.SIGINT, signal.default_int_handler)
from fleet import layers
from fleet.dataset import DatasetFactory
main = fleet.Program()
with fleet.program_guard(main, fleet.Program()):
    ids = layers.data("ids", [1], dtype="int64", lod_level=1)
    label = layers.data("label", [1], dtype="int64")
ds = DatasetFactory().create_dataset("InMemoryDataset")
ds.set_use_var([ids, label])
ds.set_filelist([sys.argv[1]])
ds.set_pipe_command(sys.argv[2])
try:
    ds.load_into_memory()
except KeyboardInterrupt:
    print("interrupted", ds.get_memory_data_size(), flush=True)
    sys.exit(3)
"""


def _start_loader(tmp_path, command):
    data = tmp_path / "part-0"
    data.write_text("1 5 1 1\n")
    script = tmp_path / "loader.py"
    script.write_text(LOADER)
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    return subprocess.Popen(
        [sys.executable, str(script), str(data), command],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _pipeline_command(tmp_path):
    """A pipeline that records its process group and then hangs: `sleep | sleep` under sh."""
    info = tmp_path / "group"
    return info, (
        f"echo $$ $(cut -d' ' -f5 /proc/$$/stat) > {info}.tmp; mv {info}.tmp {info}; "
        "cat; sleep 1000 | sleep 1000"
    )


def _read_group(info):
    assert _wait_until(info.exists, 30), "the pipe_command did not start"
    pid, pgid = map(int, info.read_text().split())
    assert _group_members(pgid), "the pipeline is not running"
    return pid, pgid


def test_ctrl_c_interrupts_load_into_memory_and_kills_the_command(tmp_path):
    info, command = _pipeline_command(tmp_path)
    loader = _start_loader(tmp_path, command)
    try:
        _, pgid = _read_group(info)
        loader.send_signal(signal.SIGINT)
        out, err = loader.communicate(timeout=20)
        assert loader.returncode == 3, err
        assert out.strip() == "interrupted 0"  # memory left as it was
        assert _wait_until(lambda: not _group_members(pgid), 10), _group_members(pgid)
    finally:
        if loader.poll() is None:
            loader.kill()
            loader.communicate(timeout=10)


def test_sigkill_of_the_trainer_takes_its_pipe_command_pipeline_down(tmp_path):
    info, command = _pipeline_command(tmp_path)
    loader = _start_loader(tmp_path, command)
    pgid = None
    try:
        _, pgid = _read_group(info)
        assert pgid != os.getpgrp()
        loader.kill()  # SIGKILL: no clean-up code runs in the trainer
        loader.communicate(timeout=10)
        assert _wait_until(lambda: not _group_members(pgid), 10), _group_members(pgid)
    finally:
        if loader.poll() is None:
            loader.kill()
            loader.communicate(timeout=10)
        if pgid is not None and _group_members(pgid):
            os.killpg(pgid, signal.SIGKILL)  # last-resort clean-up of a failed test


def test_many_files_through_pipe_commands_in_parallel_do_not_hold_each_other(tmp_path):
    """Reader threads start commands at the same time; a command's guard must not keep
    another stream's pipe open (which would stall that stream until the first ends)."""
    files = []
    for i in range(8):
        f = tmp_path / f"part-{i}"
        f.write_text("1 5 1 1\n" * 50)
        files.append(f)
    main, use_vars = _program()
    ds = _dataset(files, use_vars, "cat; sleep 0.3", "InMemoryDataset")
    ds.set_thread(4)
    ds.set_pipe_command_timeout(20)
    started = time.monotonic()
    ds.load_into_memory()
    assert ds.get_memory_data_size() == 400
    # 8 commands of 0.3 s on 4 threads: about 0.6 s when no stream waits for another's command.
    assert time.monotonic() - started < 5
