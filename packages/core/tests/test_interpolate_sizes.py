"""F.interpolate with an empty input or output size raises PyTorch's RuntimeError (issue 11,
defect 19: it was a bare ZeroDivisionError), on CPU and on meta; "area" (adaptive pooling)
accepts empty sizes, as in PyTorch."""

import pytest

import ember

torch = pytest.importorskip("torch")

CASES = [
    ("nearest", (1, 1, 4, 4), dict(size=(0, 0))),
    ("nearest-exact", (1, 1, 4, 4), dict(size=(0, 2))),
    ("bilinear", (1, 1, 4, 4), dict(size=(2, 0))),
    ("bicubic", (1, 1, 4, 4), dict(size=(0, 0))),
    ("linear", (1, 1, 4), dict(size=0)),
    ("nearest", (1, 1, 4), dict(size=0)),
    ("trilinear", (1, 1, 4, 4, 4), dict(size=(0, 1, 1))),
    ("nearest", (1, 1, 4, 4), dict(scale_factor=0.1)),
    ("nearest", (1, 1, 4, 4), dict(size=(-1, 2))),
    ("bilinear", (1, 1, 0, 4), dict(size=(2, 2))),
]


@pytest.mark.parametrize("mode,shape,kw", CASES, ids=[f"{m}-{s}-{k}" for m, s, k in CASES])
def test_empty_sizes_raise_like_torch(mode, shape, kw):
    with pytest.raises(RuntimeError) as want:
        torch.nn.functional.interpolate(torch.ones(shape), mode=mode, **kw)
    for device in ("cpu", "meta"):
        with pytest.raises(RuntimeError) as got:
            ember.nn.functional.interpolate(ember.ones(shape, device=device), mode=mode, **kw)
        assert str(got.value) == str(want.value)


def test_upsample_module_and_area_mode():
    with pytest.raises(RuntimeError, match="sizes should be greater than 0"):
        ember.nn.Upsample(size=(0, 0))(ember.ones(1, 1, 4, 4))
    for t in (ember, torch):  # adaptive pooling: an empty result, no error
        r = t.nn.functional.interpolate(t.ones(1, 1, 4, 4), size=(0, 2), mode="area")
        assert tuple(r.shape) == (1, 1, 0, 2)
