"""Every `Tensor.is_*` predicate of PyTorch 2.13 exists on ember's Tensor with the same value
(issue 11, defect 26): device predicates, layouts, and the small `is_*()` methods."""

import pytest

import ember

torch = pytest.importorskip("torch")

PROPERTIES = sorted(n for n in dir(torch.Tensor) if n.startswith("is_")
                    and not callable(getattr(torch.ones(1), n)))
METHODS = ["is_complex", "is_conj", "is_contiguous", "is_distributed", "is_floating_point",
           "is_inference", "is_neg", "is_shared", "is_signed", "is_pinned"]


def test_torch_lists_the_device_predicates():
    # the list is read from torch, so a predicate torch adds shows up here
    for name in ("is_xpu", "is_mps", "is_mkldnn", "is_ipu", "is_vulkan", "is_maia", "is_mtia",
                 "is_meta", "is_quantized", "is_sparse", "is_sparse_csr", "is_nested", "is_xla"):
        assert name in PROPERTIES


@pytest.mark.parametrize("name", PROPERTIES)
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_property_values_match_torch(name, device):
    for dt in ("float32", "int64", "complex64"):
        e = ember.ones(2, 3, dtype=getattr(ember, dt), device=device)
        t = torch.ones(2, 3, dtype=getattr(torch, dt), device=device)
        assert getattr(e, name) == getattr(t, name), f"{name} on {device} {dt}"
        assert isinstance(getattr(e, name), bool)


@pytest.mark.parametrize("name", METHODS)
def test_method_values_match_torch(name):
    for dt in ("float32", "uint8", "bool", "int8", "complex64"):
        e = ember.ones(2, 3, dtype=getattr(ember, dt))
        t = torch.ones(2, 3, dtype=getattr(torch, dt))
        assert getattr(e, name)() == getattr(t, name)(), f"{name} {dt}"


def test_every_is_method_of_torch_exists():
    missing = [n for n in dir(torch.Tensor) if n.startswith("is_") and not hasattr(ember.Tensor, n)]
    assert missing == []


def test_predicates_follow_the_device_type():
    class Fake:  # a plugin's device: the predicate reads device.type
        device = ember.device("meta")
    assert ember.Tensor.is_xpu.fget(Fake()) is False
    Fake.device = type("D", (), {"type": "xpu"})()
    assert ember.Tensor.is_xpu.fget(Fake()) is True
    assert ember.Tensor.is_mps.fget(Fake()) is False


@pytest.mark.parametrize("values", [[], [0.0], [2.0], [1.0, 2.0]])
def test_is_nonzero_and_size_methods_match_torch(values):
    e, t = ember.tensor(values), torch.tensor(values)
    try:
        want = t.is_nonzero()
    except RuntimeError as err:
        with pytest.raises(RuntimeError, match=str(err)):
            e.is_nonzero()
    else:
        assert e.is_nonzero() == want
    assert e.is_same_size(ember.zeros(len(values))) and not e.is_same_size(ember.zeros(5, 1))
    x = ember.ones(3, 4)
    assert x.is_set_to(x) and not x.is_set_to(x[:2]) and not x.is_set_to(x.clone())
    tx = torch.ones(3, 4)
    for f in (lambda a: a.view(3, 4), lambda a: a.t(), lambda a: a[1:], lambda a: a.view(12)):
        assert x.is_set_to(f(x)) == tx.is_set_to(f(tx))
    with pytest.raises(RuntimeError, match="is_coalesced expected sparse"):
        x.is_coalesced()
