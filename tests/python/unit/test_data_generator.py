"""fleet.data_generator: the MultiSlot lines a pipe_command script writes, as Paddle's."""

import io

import numpy as np
import pytest

from fleet import data_generator as dg


class WordsAndLabel(dg.MultiSlotDataGenerator):
    def generate_sample(self, line):
        def local_iter():
            words, label = line.strip().split(";")
            yield [("words", [int(w) for w in words.split()]), ("label", [int(label)])]

        return local_iter


def _run(generator, text):
    out = io.StringIO()
    generator.run_from_stdin(stdin=io.StringIO(text), stdout=out)
    return out.getvalue()


def test_multislot_lines_have_counts_then_values():
    assert _run(WordsAndLabel(), "1926 8 17;1\n5;0\n") == "3 1926 8 17 1 1\n1 5 1 0\n"


def test_floats_make_a_float_slot_and_read_back_exactly():
    class Dense(dg.MultiSlotDataGenerator):
        def generate_sample(self, line):
            value = np.float32(float(line))
            return [[("x", [float(value), np.float32(value)]), ("id", [np.int64(3)])]]

    out = _run(Dense(), "0.1\n")
    count, a, b, n_ids, ident = out.split()
    assert (count, n_ids, ident) == ("2", "1", "3")
    assert np.float32(a) == np.float32(0.1) and np.float32(b) == np.float32(0.1)


def test_generate_sample_may_return_an_iterable_and_skip_none():
    class Lists(dg.MultiSlotDataGenerator):
        def generate_sample(self, line):
            return [None, [("a", [int(line)])]]

    assert _run(Lists(), "4\n5\n") == "1 4\n1 5\n"


def test_generate_batch_sees_set_batch_samples():
    class Padded(dg.MultiSlotDataGenerator):
        def generate_sample(self, line):
            return [[("ids", [int(x) for x in line.split()])]]

        def generate_batch(self, samples):
            longest = max(len(s[0][1]) for s in samples)

            def local_iter():
                for s in samples:
                    ids = s[0][1]
                    yield [("ids", ids + [0] * (longest - len(ids)))]

            return local_iter

    gen = Padded()
    gen.set_batch(2)
    assert _run(gen, "1\n2 3\n4\n") == "2 1 0\n2 2 3\n1 4\n"


@pytest.mark.parametrize(
    "sample,message",
    [
        ([("words", [])], "is empty"),
        ([("words", ["x"])], "must be an int or a float"),
        ([("words", [True])], "must be an int or a float"),
        ("words 1", "must be a list or tuple"),
        ([(3, [1])], "must be a str"),
    ],
)
def test_bad_samples_raise(sample, message):
    class Bad(dg.MultiSlotDataGenerator):
        def generate_sample(self, line):
            return [sample]

    with pytest.raises(ValueError, match=message):
        _run(Bad(), "x\n")


def test_slots_must_match_the_first_sample():
    class Drifting(dg.MultiSlotDataGenerator):
        def generate_sample(self, line):
            return [[(line.strip(), [1])]]

    with pytest.raises(ValueError, match="first sample named it 'a'"):
        _run(Drifting(), "a\nb\n")


def test_string_generator_passes_strings_through():
    class Strings(dg.MultiSlotStringDataGenerator):
        def generate_sample(self, line):
            return [[("ids", line.split()), ("label", ["1"])]]

    assert _run(Strings(), "7 8\n") == "2 7 8 1 1\n"


def test_python_pipe_command_quotes_paths():
    cmd = dg.python_pipe_command("/tmp/my reader.py", "--flag", "a b")
    assert cmd.startswith("PYTHONPATH=")
    assert "'/tmp/my reader.py' --flag 'a b'" in cmd
