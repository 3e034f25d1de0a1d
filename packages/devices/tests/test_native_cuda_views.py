"""View ops of cuda tensors on core's native hit path (csrc/viewpath.cpp: metadata only, any
device) against the Python path: shapes, strides, offsets, storage sharing, `_base`, version
counters, requires_grad, grad_fn names and one backward. On a GPU in-process; without one on the
fake device (a subprocess, see cuda_script.py)."""
from cuda_script import run_script

SCRIPT = r"""
import numpy as np, ember
import ember.autograd
from ember import _native

VIEWS = [
    lambda x: x.transpose(0, 2), lambda x: x[0].t(), lambda x: x.permute(2, 0, 1),
    lambda x: x.unsqueeze(1), lambda x: x.unsqueeze(0).squeeze(0), lambda x: x.view(6, 4),
    lambda x: x.reshape(-1), lambda x: x.flatten(1), lambda x: x[:, :1].expand(2, 5, 4),
    lambda x: x.select(1, -1), lambda x: x[:, 1:, ::2], lambda x: x.narrow(2, 1, 2),
    lambda x: x.detach(), lambda x: x.contiguous(),
]

def fields(r, x):
    root = x._base if x._base is not None else x
    ag = r._ag
    return (tuple(r.shape), r.stride(), r.storage_offset(), r.device.type, r._base is root,
            r._base is None, r is x, r.untyped_storage() is x.untyped_storage(),
            r.requires_grad, None if r.grad_fn is None else r.grad_fn.name(),
            None if ag is None else ag.view_version, tuple(sorted(r.__dict__)))

def run(grad):
    x = ember.tensor(np.arange(24.0).reshape(2, 3, 4)).cuda()
    if grad:
        x.requires_grad_()
    return [fields(f(x), x) for f in VIEWS]

made = _native.view_stats()
for grad in (False, True):
    _native.set_enabled(False)
    ref = run(grad)
    _native.set_enabled(True)
    assert run(grad) == ref, (grad, run(grad), ref)
if made is not None:
    assert _native.view_stats()[0] >= made[0] + 2 * len(VIEWS) - 4, (made, _native.view_stats())

# a version counter shared with the base, and one backward through recorded views
grads = []
for on in (False, True):
    _native.set_enabled(on)
    x = ember.ones(3, 4).cuda()
    v = x.t()
    with ember.no_grad():
        x.add_(1)
    assert v._version == x._version == 1 and v.cpu().tolist() == [[2.0] * 3] * 4
    a = ember.ones(3, 4, requires_grad=True, device="cuda")
    (a.t().unsqueeze(0)[0, 1:] * 3).sum().backward()
    grads.append(a.grad.cpu().tolist())
_native.set_enabled(True)
assert grads[0] == grads[1] == [[0.0, 3.0, 3.0, 3.0]] * 3, grads
print("ok")
"""


def test_native_views_of_cuda_tensors():
    run_script(SCRIPT, "test_native_cuda_views", timeout=900)
