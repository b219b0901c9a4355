"""Program building: shapes from C++ inference, naming, printing, cloning, guards, errors."""

import pytest

import fleet
from fleet import layers
from fleet.errors import NotFound


def _mlp():
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = layers.data("x", [13])
        label = layers.data("label", [1], dtype="int64")
        hidden = layers.fc(x, 8, act="relu")
        hidden = layers.dropout(hidden, 0.1)
        prob = layers.fc(hidden, 2, act="softmax")
        loss = layers.mean(layers.cross_entropy(prob, label))
        fleet.optimizer.SGD(0.1).minimize(loss)
    return main, startup, hidden, prob, loss


def test_shapes_are_inferred_at_build_time():
    main, startup, hidden, prob, loss = _mlp()
    assert hidden.shape == (-1, 8)
    assert prob.shape == (-1, 2)
    assert loss.shape == (1,)
    params = {p.name for p in main.global_block().all_parameters()}
    assert len(params) == 4
    # Every parameter (and the optimizer's learning rate) is initialised by the startup program.
    initialised = {name for op in startup.global_block().ops for name in op.output_names}
    assert params | {"learning_rate_0"} == initialised


def test_program_prints_ops_and_vars_readably():
    main, _, _, _, _ = _mlp()
    text = str(main)
    for expected in [
        "mul(",
        "elementwise_add(",
        "softmax(",
        "cross_entropy(",
        "mean(",
        "sgd(",
        "Parameter(fc_0",
        "float32[-1, 8]",
        "test_framework.py:",
    ]:
        assert expected in text, expected


def test_program_guard_restores_defaults():
    before = fleet.default_main_program()
    main = fleet.Program()
    with fleet.program_guard(main):
        assert fleet.default_main_program() is main
    assert fleet.default_main_program() is before


def test_clone_for_test_drops_training_ops_and_sets_is_test():
    main, _, _, _, _ = _mlp()
    test_program = main.clone(for_test=True)
    types = [op.type for op in test_program.global_block().ops]
    assert "sgd" not in types and not any(t.endswith("_grad") for t in types)
    dropout = [op for op in test_program.global_block().ops if op.type == "dropout"][0]
    assert dropout.attrs["is_test"] is True
    assert any(op.type == "sgd" for op in main.global_block().ops)


def test_unknown_op_type_is_named():
    main = fleet.Program()
    with pytest.raises(NotFound, match="unknown op type 'no_such_op'"):
        main.global_block().append_op("no_such_op", inputs={}, outputs={})


def test_registered_ops_lists_the_op_set():
    ops = set(fleet.registered_ops())
    for name in ["feed", "fetch", "mul", "lookup_table", "sequence_pool", "adam", "auc"]:
        assert name in ops
