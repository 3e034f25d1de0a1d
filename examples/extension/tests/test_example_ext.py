"""The example extension's C++ op against whatever ember-core is installed (Bazel's, or the
current / minor-bumped cores of ci/check_abi_compat.py): forward, fake, derivative, opcheck."""

import os

import ember_example_ext
import numpy as np
import pytest

import ember


def test_forward_matches_numpy():
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    y = ember_example_ext.scaled_square(ember.tensor(x), 2.5)
    np.testing.assert_allclose(y.numpy(), 2.5 * x * x, rtol=1e-6)
    assert y.dtype == ember.float32


def test_non_contiguous_and_float64():
    x = ember.arange(6.0, dtype=ember.float64).reshape(2, 3).t()
    assert ember.ops.ember_example.scaled_square(x, 2.0).tolist() == (2 * x * x).tolist()


def test_zero_dim_tensor():
    # Tensor::sizes() of a 0-dim tensor is an empty vector (its data() is null): issue 11, defect 16
    x = ember.tensor(3.0, requires_grad=True)
    y = ember_example_ext.scaled_square(x, 2.0)
    assert y.shape == () and y.item() == 18.0
    y.backward()
    assert x.grad.shape == () and x.grad.item() == 12.0
    assert ember_example_ext.scaled_square(ember.empty((), device="meta")).shape == ()


def test_fake_kernel_on_meta():
    y = ember_example_ext.scaled_square(ember.empty(5, 7, device="meta"))
    assert y.device.type == "meta" and tuple(y.shape) == (5, 7)


def test_derivative():
    x = ember.tensor([1.0, -2.0, 3.0], requires_grad=True)
    ember_example_ext.scaled_square(x, 3.0).sum().backward()
    assert x.grad.tolist() == [6.0, -12.0, 18.0]


def test_opcheck():
    x = ember.randn(4, dtype=ember.float64, requires_grad=True)
    res = ember.library.opcheck(ember.ops.ember_example.scaled_square, (x, 1.5))
    assert set(res.values()) == {"SUCCESS"}


def test_kernel_errors_are_python_errors():
    with pytest.raises(RuntimeError, match="ember_example::scaled_square: expected a float32"):
        ember_example_ext.scaled_square(ember.ones(2, dtype=ember.int64))


def test_core_offers_what_the_extension_targets():
    from ember import _C

    major, minor = _C.abi_version()
    assert major == ember_example_ext.TARGET_VERSION[0]
    assert minor >= ember_example_ext.TARGET_VERSION[1]
    want = os.environ.get("EMBER_EXPECT_CORE_ABI")  # set by ci/check_abi_compat.py
    if want:
        assert f"{major}.{minor}" == want
