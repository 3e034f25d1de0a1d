"""Cross-package: core runs inference whatever else is installed (design.md: core alone works)."""

import ember


def test_import_ember_and_tensor_math():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    y = x * x + x
    assert y.tolist() == [[2.0, 6.0], [12.0, 20.0]]
    assert y.dtype == ember.float32
    assert str(ember.float32) == "ember.float32"


def test_no_grad_lives_in_core():
    with ember.no_grad():
        assert not ember.is_grad_enabled()
    assert ember.is_grad_enabled()


def test_native_extension_is_optional_but_offered_by_wheels():
    import importlib.util

    spec = importlib.util.find_spec("ember._C")
    if spec is not None:  # built: Bazel, or the platform wheel
        import ember_abi
        from ember import _C

        assert _C.abi_version() == ember_abi.ABI_VERSION
