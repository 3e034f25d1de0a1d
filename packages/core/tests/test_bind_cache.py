"""OpDef.__call__'s argument binding remembers the classes of positional calls that passed its
checks (_bind.py): a later call of the same classes skips the checks, anything else is checked
as before (PyTorch's errors), whatever was called first."""
import pytest

import ember
from ember._ops import OPS
from ember._ops._bind import _plan


def test_a_passed_signature_is_remembered_and_defaults_filled():
    op = OPS["sum.dim_IntList"] if "sum.dim_IntList" in OPS else OPS["amax"]
    x = ember.ones(2, 3)
    first = op.bind((x, [1]), {})
    assert _plan(op)[5], "nothing remembered"
    again = op.bind((x, [0]), {})
    assert again[0] is x and list(again[1]) == [0] and again[2:] == first[2:]
    assert op(x, [1]).shape == (2,)


def test_other_classes_are_still_checked():
    op = OPS["amax"]
    x = ember.ones(2, 3)
    op(x, [1])
    op(x, [1])
    with pytest.raises(RuntimeError, match="Expected a value of type"):
        op(x, ["a"])  # a str in an int list: the same container, another item class
    with pytest.raises(RuntimeError, match="Expected a value of type"):
        op(x, 1.5)
    with pytest.raises(RuntimeError, match="expected at most"):
        op(x, [1], False, 3)


def test_a_tensor_for_a_list_argument_is_judged_by_its_value():
    op = OPS["amax"]
    x = ember.ones(2, 3)
    for _ in range(2):
        op.bind((x, ember.tensor(1)), {})  # a 0-d tensor stands for one int
    with pytest.raises(RuntimeError, match="Expected a value of type"):
        op.bind((x, ember.tensor([1, 0])), {})  # not a lone int: refused as before


def test_a_generator_is_read_on_every_call():
    op = OPS["amax"]
    x = ember.ones(2, 3, 4)
    for _ in range(3):
        assert op(x, (d for d in (1, 2))).shape == (2,)
