"""Ops with several named results (max/min over a dim, topk, sort, mode, median, kthvalue,
cummax, aminmax) return the CPU's named tuple on cuda too (`.values`, `.indices`), on the native
path, its device plans and the Python path, with and without grad. On a GPU in-process, else on
the fake device (a subprocess: the environment must be set before triton is imported)."""
from cuda_script import run_script

SCRIPT = r"""
import ember
from ember import _native
calls = [lambda t: t.max(1), lambda t: t.min(1), lambda t: t.topk(2), lambda t: t.sort(1),
         lambda t: t.mode(1), lambda t: t.median(1), lambda t: t.kthvalue(2, 1),
         lambda t: t.cummax(1), lambda t: ember.aminmax(t, dim=1)]
x = ember.randn(3, 4)
want = [(type(f(x)).__name__, type(f(x))._fields) for f in calls]
for native in (True, False):
    _native.set_enabled(native)
    for grad in (False, True):
        t = x.cuda().requires_grad_(grad)
        for _ in range(3):   # (a device plan's hit from the second call)
            got = [f(t) for f in calls]
        assert [(type(r).__name__, type(r)._fields) for r in got] == want, (native, grad, got)
        assert got[0].values.device.type == "cuda" and got[2].indices.dtype is ember.int64
        if grad:
            got[0].values.sum().backward()
            assert t.grad.sum().item() == 3.0
_native.set_enabled(True)
print("ok")
"""


def test_named_results_on_cuda():
    run_script(SCRIPT, "test_cuda_return_types", timeout=600)
