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


_WITHOUT_C = """
import sys
sys.modules["ember._C"] = None   # as on a Python the native part was not built for
import ember
x = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
print((x @ x + x).tolist())
print(ember.nn.functional.softmax(ember.tensor([0.0, 0.0]), dim=0).tolist())
from ember.library import _abi
try:
    _abi.abi_version()
except RuntimeError as e:
    print("abi:", e)
"""


def test_core_works_without_the_native_extension():
    # the case the test above cannot see where ember._C is built: run it in a fresh interpreter
    # that cannot import ember._C, and check inference works and the ABI fails clearly
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", _WITHOUT_C], env=env, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "[[8.0, 12.0], [18.0, 26.0]]"
    assert lines[1] == "[0.5, 0.5]"
    assert lines[2].startswith("abi: ember's stable ABI needs ember._C"), lines[2]
