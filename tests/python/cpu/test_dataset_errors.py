"""Bad input and failures of a dataset pass surface as fleet errors, promptly, with nothing left
running: missing files, an empty file list, a failing pipe_command, a trainer error while a
pipe_command is still producing, Ctrl-C, and mismatches between the dataset and the program."""

import os
import signal
import threading
import time

import pytest

import fleet
from fleet import errors, layers
from fleet.dataset import DatasetFactory

LINE = "2 5 6 1 1\n"


def _program():
    main = fleet.Program()
    with fleet.program_guard(main, fleet.Program()):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        label = layers.data("label", [1], dtype="int64")
    return main, [ids, label]


def _dataset(files, use_vars, pipe_command="cat", kind="QueueDataset", threads=1):
    ds = DatasetFactory().create_dataset(kind)
    ds.set_use_var(use_vars)
    ds.set_batch_size(4)
    ds.set_thread(threads)
    ds.set_filelist([str(f) for f in files])
    ds.set_pipe_command(pipe_command)
    return ds


def _train(main, ds, threads=1, **kwargs):
    return fleet.Executor().train_from_dataset(
        main,
        ds,
        scope=fleet._core.Scope(),
        thread=threads,
        print_period=0,
        **kwargs,
    )


def _processes_with(marker):
    """PIDs whose command line contains `marker` (a number unique to one test)."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def _wait_gone(marker, seconds=10):
    deadline = time.monotonic() + seconds
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _processes_with(marker)


@pytest.mark.parametrize("kind", ["QueueDataset", "InMemoryDataset"])
def test_missing_file_fails_before_training(tmp_path, kind):
    good = tmp_path / "good"
    good.write_text(LINE * 10)
    main, use_vars = _program()
    ds = _dataset([good, tmp_path / "missing-1"], use_vars, kind=kind)
    with pytest.raises(errors.NotFound, match="missing-1"):
        if kind == "InMemoryDataset":
            ds.load_into_memory()
        _train(main, ds)


def test_empty_file_list_is_an_error():
    main, use_vars = _program()
    ds = _dataset([], use_vars)
    with pytest.raises(errors.InvalidArgument, match="file list is empty"):
        _train(main, ds)
    memory = _dataset([], use_vars, kind="InMemoryDataset")
    with pytest.raises(errors.InvalidArgument, match="file list is empty"):
        memory.load_into_memory()


def test_empty_files_give_an_empty_pass(tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("")
    main, use_vars = _program()
    run = _train(main, _dataset([empty], use_vars))
    assert (run.batches, run.samples) == (0, 0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["QueueDataset", "InMemoryDataset"])
def test_failing_pipe_command_is_an_error_not_a_hang(tmp_path, kind):
    data = tmp_path / "part-3"
    data.write_text(LINE * 100)
    main, use_vars = _program()
    # Half the lines come through, then the reader dies.
    ds = _dataset(
        [data],
        use_vars,
        kind=kind,
        pipe_command="head -n 50; echo 'reader exploded on purpose' >&2; exit 7",
    )
    with pytest.raises(errors.InvalidArgument) as info:
        if kind == "InMemoryDataset":
            ds.load_into_memory()
        _train(main, ds)
    message = str(info.value)
    assert "exited with code 7" in message and str(data) in message
    assert "reader exploded on purpose" in message


@pytest.mark.timeout(60)
def test_malformed_line_in_one_of_several_files_names_it(tmp_path):
    files = []
    for i in range(4):
        path = tmp_path / f"part-{i}"
        path.write_text(LINE * 30 + ("2 5 x 1 1\n" if i == 2 else "") + LINE * 30)
        files.append(path)
    main, use_vars = _program()
    with pytest.raises(errors.InvalidArgument, match=rf"{files[2]}:31: slot 'ids'"):
        _train(main, _dataset(files, use_vars, threads=3), threads=2)


@pytest.mark.timeout(60)
def test_trainer_error_kills_the_running_pipe_command(tmp_path):
    data = tmp_path / "part-0"
    data.write_text(LINE * 8)
    marker = "987123"  # sleeps this long: a number no other process has in its command line
    main = fleet.Program()
    with fleet.program_guard(main, fleet.Program()):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        label = layers.data("label", [1], dtype="int64")
        layers.scale(label, 2.0)  # scale has a float32 kernel only: fails on the int64 label
    ds = _dataset([data], [ids, label], pipe_command=f"cat; sleep {marker}")
    start = time.monotonic()
    with pytest.raises(errors.FleetError, match="scale"):
        _train(main, ds)
    assert time.monotonic() - start < 20
    assert _wait_gone(marker) == []


@pytest.mark.timeout(60)
def test_ctrl_c_cancels_the_pass_and_kills_the_pipe_command(tmp_path):
    data = tmp_path / "part-0"
    data.write_text(LINE * 8)
    marker = "987124"
    main, use_vars = _program()
    ds = _dataset([data], use_vars, pipe_command=f"cat; sleep {marker}")
    # As in a terminal: a test run started in the background by a non-interactive shell
    # inherits SIGINT ignored, and then Python raises no KeyboardInterrupt.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            _train(main, ds)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert _wait_gone(marker) == []


def test_use_var_must_be_in_the_program(tmp_path):
    data = tmp_path / "part-0"
    data.write_text(LINE)
    main, use_vars = _program()
    other = fleet.Program()
    with fleet.program_guard(other, fleet.Program()):
        stranger = layers.data("stranger", [1], dtype="int64")
    with pytest.raises(errors.NotFound, match="'stranger'"):
        _train(main, _dataset([data], [use_vars[0], stranger]))
    with pytest.raises(errors.NotFound, match="fetch variable 'nope'"):
        _train(main, _dataset([data], use_vars), fetch_list=["nope"])


def test_bad_settings_are_rejected():
    ds = DatasetFactory().create_dataset("InMemoryDataset")
    with pytest.raises(errors.InvalidArgument):
        ds.set_batch_size(0)
    with pytest.raises(errors.InvalidArgument):
        ds.set_thread(-1)
    with pytest.raises(errors.InvalidArgument, match="does not exist"):
        DatasetFactory().create_dataset("BoxPSDataset")
    main = fleet.Program()
    with fleet.program_guard(main, fleet.Program()):
        wrong = layers.data("f64", [1], dtype="float64")
    with pytest.raises(errors.InvalidArgument, match="int64 and float32"):
        ds.set_use_var([wrong])
    with pytest.raises(errors.InvalidArgument, match="load_into_memory"):
        ds.local_shuffle()
    with pytest.raises(errors.InvalidArgument, match="QueueDataset does not shuffle"):
        DatasetFactory().create_dataset("QueueDataset").local_shuffle()
