"""The stable C ABI from C: abi_c/check_abi.c exercises every entry of core's table (and its error
paths), compiled here with the system C compiler against the ember-stable-abi headers only and
driven through ctypes. Then the ops it registered are used from Python (dispatcher, autograd).
"""

import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

import ember

_C = pytest.importorskip("ember._C", reason="ember._C not built (running from source)")
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    import ember_abi

    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler (cc) is needed to build the C ABI check"
    so = str(tmp_path_factory.mktemp("abi_c") / "check_abi.so")
    # -std=c99 -pedantic -Werror: the header must be plain C, not C++ in disguise
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-O1", "-shared",
                    "-fPIC", "-I", ember_abi.get_include(),
                    os.path.join(HERE, "abi_c", "check_abi.c"), "-o", so],
                   check=True, capture_output=True, text=True)
    dll = ctypes.CDLL(so)  # CDLL releases the GIL: every entry must take it itself
    dll.ember_abi_c_check.restype = ctypes.c_int
    dll.ember_abi_c_check.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    dll.ember_abi_c_version_check.argtypes = [ctypes.c_uint32] * 3 + [ctypes.c_char_p,
                                                                      ctypes.c_size_t]
    return dll


@pytest.fixture(scope="module")
def checked(lib):
    report = ctypes.create_string_buffer(16384)
    failures = lib.ember_abi_c_check(_C._abi_table_address(), report, len(report))
    checks, failed = ctypes.c_int(), ctypes.c_int()
    lib.ember_abi_c_counts(ctypes.byref(checks), ctypes.byref(failed))
    return failures, checks.value, report.value.decode()


def test_every_entry_from_c(checked):
    failures, checks, report = checked
    assert failures == 0, f"{failures} of {checks} C checks failed:\n{report}"
    assert checks >= 110  # all of them ran (none skipped by an early return)


def test_capsule_is_the_table():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    assert get(_C._ABI_TABLE, b"ember._C._ABI_TABLE") == _C._abi_table_address()


def test_table_header_matches_headers():
    import ember_abi

    header = (ctypes.c_uint32 * 4).from_address(_C._abi_table_address())
    assert (header[0], header[1]) == ember_abi.ABI_VERSION == _C.abi_version()
    assert header[2] > 0


def test_dtype_codes_match_python_side():
    from ember.library import _abi

    get = {name: getattr(ember, name) for name in ("bool", "uint8", "int8", "int16", "int32",
                                                   "int64", "float16", "bfloat16", "float32",
                                                   "float64", "complex64", "complex128")}
    # the C getters return the same numbers the Python helpers use (PyTorch's ScalarType)
    torch_numbers = {"uint8": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "float16": 5,
                     "float32": 6, "float64": 7, "complex64": 9, "complex128": 10, "bool": 11,
                     "bfloat16": 15}
    for name, d in get.items():
        assert _abi.dtype_code(d) == torch_numbers[name]


def test_version_check_message(lib):
    msg = ctypes.create_string_buffer(256)
    size_1_1 = 1 << 20
    assert lib.ember_abi_c_version_check(1, 1, size_1_1, msg, 256) == 0
    assert lib.ember_abi_c_version_check(1, 5, size_1_1, msg, 256) == 0  # a newer core: fine
    assert lib.ember_abi_c_version_check(1, 0, size_1_1, msg, 256) == -1
    assert msg.value.decode() == ("this extension targets ember stable ABI 1.1 but the installed "
                                  "ember-core offers ABI 1.0: upgrade ember-core")
    assert lib.ember_abi_c_version_check(2, 0, size_1_1, msg, 256) == -1
    assert "offers ABI 2.0" in msg.value.decode()


def test_c_ops_are_ops(checked):
    ops = ember.ops.abi_c_test
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = ember.tensor([10.0, 20.0], requires_grad=True)
    r = ops.axpy(x, y, 3.0)
    assert r.tolist() == [13.0, 26.0]
    r.sum().backward()  # the derivative is the C backward op (it calls ember's mul from C)
    assert x.grad.tolist() == [3.0, 3.0] and y.grad.tolist() == [1.0, 1.0]
    m = ops.axpy(ember.empty(4, 5, device="meta"), ember.empty(4, 5, device="meta"))
    assert m.device.type == "meta" and tuple(m.shape) == (4, 5)
    with pytest.raises(RuntimeError, match="refuses on purpose"):
        ops.fails(x.detach())
    with pytest.raises(RuntimeError, match="expected float32"):
        ops.axpy(ember.ones(2, dtype=ember.float64), ember.ones(2, dtype=ember.float64))
    # the schema is checked before the kernel runs, as torch.ops checks it
    with pytest.raises(RuntimeError, match="Expected a value of type 'Tensor' for argument 'x' "
                                           "but instead found type 'ndarray'"):
        ops.axpy(np.ones(2), y)


class _Opaque:
    """A value of a type the schema check cannot judge (as a symbolic size would be): it reaches
    the C kernel's boxing, which must name the op and the argument."""


def test_wrong_scalar_types_name_the_op_and_argument(checked):
    ops = ember.ops.abi_c_test
    x, y = ember.ones(2), ember.ones(2)
    # torch.ops' check (RuntimeError), before the kernel: issue 11, defect 19
    with pytest.raises(RuntimeError, match=r"abi_c_test::axpy\(\) Expected a value of type "
                                           r"'float' for argument 'a' but instead found type 'str'"):
        ops.axpy(x, y, "3")
    with pytest.raises(TypeError, match=r"abi_c_test::axpy argument 'a': expected a float, got "
                                        r"_Opaque"):
        ops.axpy(x, y, _Opaque())
    # and below the schema check, the C boxing itself (pybind11 named neither)
    kernel = ops.axpy.kernels["cpu"]
    for bad, kind in (("3", "str"), (1j, "complex"), ([1.0], "list")):
        with pytest.raises(TypeError, match=rf"abi_c_test::axpy argument 'a': expected a float, "
                                            rf"got {kind}"):
            kernel(x, y, bad)
    assert kernel(x, y, 2).tolist() == [3.0, 3.0]  # ints and numpy numbers are fine
    assert kernel(x, y, np.float32(2.0)).tolist() == [3.0, 3.0]
