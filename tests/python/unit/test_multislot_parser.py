"""The MultiSlot format as the C++ parser reads it, seen from Python: values, shapes and lod of
the fed tensors, and one error per malformed-line rule naming the file, line and slot.
(tests/cpp/data/multislot_parser_test.cc covers the same rules at the C++ level.)"""

import numpy as np
import pytest

import fleet
from fleet import errors, layers
from fleet.dataset import DatasetFactory


def _program():
    main = fleet.Program()
    with fleet.program_guard(main, fleet.Program()):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        w = layers.data("w", [2])
        label = layers.data("label", [1], dtype="int64")
    return main, [ids, w, label]


def _read_all(tmp_path, text, kind="QueueDataset", skip_bad_lines=False):
    """Feeds `text` as one file in one batch through a program with no ops; returns the run."""
    path = tmp_path / "part-00000"
    path.write_text(text)
    main, use_vars = _program()
    dataset = DatasetFactory().create_dataset(kind)
    dataset.set_use_var(use_vars)
    dataset.set_batch_size(1000)
    dataset.set_thread(1)
    dataset.set_filelist([str(path)])
    dataset.set_skip_bad_lines(skip_bad_lines)
    if kind == "InMemoryDataset":
        dataset.load_into_memory()
    run = fleet.Executor().train_from_dataset(
        main,
        dataset,
        scope=fleet._core.Scope(),
        thread=1,
        fetch_list=["ids", "w", "label"],
        print_period=0,
    )
    return run, dataset


@pytest.mark.parametrize("kind", ["QueueDataset", "InMemoryDataset"])
def test_values_shapes_and_lod(tmp_path, kind):
    text = "3 11 12 13 2 0.5 -1.5e2 1 1\n\n1\t-4\t2 3 4 1 0\r\n2 9223372036854775807 7 2 +1 2 1 1"
    run, _ = _read_all(tmp_path, text, kind)
    assert (run.batches, run.samples) == (1, 3)
    np.testing.assert_array_equal(run.fetch["ids"][:, 0], [11, 12, 13, -4, 9223372036854775807, 7])
    assert run.fetch["ids"].dtype == np.int64
    assert run.fetch_lod["ids"] == [[0, 3, 4, 6]]
    np.testing.assert_array_equal(
        run.fetch["w"], np.array([[0.5, -150], [3, 4], [1, 2]], np.float32)
    )
    assert run.fetch_lod["w"] == []
    np.testing.assert_array_equal(run.fetch["label"], [[1], [0], [1]])


BAD_LINES = [
    ("x 5 2 0 0 1 1", "ids", "count 'x' is not a non-negative integer"),
    ("0 2 0 0 1 1", "ids", "count is 0"),
    ("1 5 3 0 0 0 1 1", "w", "count is 3 but the slot is dense with 2 values"),
    ("3 5 6", "ids", "the line ends after 2 of 3 values"),
    ("1 5 2 0 0", "label", "missing"),
    ("1 abc 2 0 0 1 1", "ids", "value 1 'abc' is not an integer"),
    ("1 5 2 0 zz 1 1", "w", "value 2 'zz' is not a number"),
    ("1 9223372036854775808 2 0 0 1 1", "ids", "outside the int64 range"),
    ("1 5 2 0 0 1 1 4", "label", "unexpected text '4' after the last slot"),
]


@pytest.mark.parametrize("line,slot,what", BAD_LINES)
def test_malformed_line_names_file_line_and_slot(tmp_path, line, slot, what):
    with pytest.raises(errors.InvalidArgument) as info:
        _read_all(tmp_path, f"1 1 2 0 0 1 0\n{line}\n1 2 2 0 0 1 1\n")
    path = str(tmp_path / "part-00000")
    message = str(info.value)
    assert message.startswith(f"{path}:2: slot '{slot}'"), message
    assert what in message, message


@pytest.mark.parametrize("kind", ["QueueDataset", "InMemoryDataset"])
def test_skip_bad_lines_counts_and_keeps_the_good_ones(tmp_path, kind, capsys):
    good = ["1 1 2 0 0 1 0", "1 2 2 0 0 1 1", "1 3 2 0 0 1 1"]
    bad = ["1 x 2 0 0 1 1", "2 5 2 0 0 1 1", "0 2 0 0 1 0"]
    text = "\n".join([good[0], bad[0], good[1], bad[1], bad[2], good[2]]) + "\n"
    run, dataset = _read_all(tmp_path, text, kind, skip_bad_lines=True)
    path = str(tmp_path / "part-00000")
    assert run.samples == 3
    assert run.fetch_sums["ids"] == 6 and run.fetch_sums["label"] == 2
    # A queue pass counts while training; an in-memory dataset while loading.
    stats = (
        dataset.load_stats
        if kind == "InMemoryDataset"
        else {"bad_lines": run.skipped_lines, "bad_line_examples": run.skipped_examples}
    )
    assert stats["bad_lines"] == 3
    assert stats["bad_line_examples"][0].startswith(f"{path}:2: slot 'ids'")
    assert len(stats["bad_line_examples"]) == 3
    assert "skipped 3 malformed lines" in capsys.readouterr().out
