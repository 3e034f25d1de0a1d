"""softmax / log_softmax backward on cuda: _softmax_backward_data and
_log_softmax_backward_data are one Triton program per row (rows that fit a tile and longer
rows, any dim, float32 and bfloat16), equal to PyTorch's CPU gradients; their errors are
PyTorch's. On a GPU in-process, else on the fake device (a subprocess: the environment must be
set before triton is imported)."""
from cuda_script import run_script

SCRIPT = r"""
import numpy as np, ember, torch
from ember.cuda.kernels import reduction as R
launches = [0]
_launch = R._launch
def counting(be, kern, *a, **kw):
    launches[0] += kern.__name__ == "row_softmax_backward"
    return _launch(be, kern, *a, **kw)
R._launch = counting
n = 0
for log in (False, True):
    name = "log_softmax" if log else "softmax"
    for shape, dim in (((4, 7), -1), ((3, 5000), 1), ((2, 6, 5), 1), ((8, 64), 0)):
        for dt in ("float32", "bfloat16"):
            rng = np.random.default_rng(n)
            x = rng.standard_normal(shape).astype("float32")
            g = rng.standard_normal(shape).astype("float32")
            te = ember.tensor(x).to(getattr(ember, dt)).cuda().requires_grad_()
            tt = torch.tensor(x).to(getattr(torch, dt)).requires_grad_()
            getattr(ember.nn.functional, name)(te, dim).backward(
                ember.tensor(g).to(getattr(ember, dt)).cuda())
            getattr(torch.nn.functional, name)(tt, dim).backward(
                torch.tensor(g).to(getattr(torch, dt)))
            tol = 2e-2 if dt == "bfloat16" else 1e-5
            assert te.grad.dtype == getattr(ember, dt) and te.grad.device.type == "cuda"
            np.testing.assert_allclose(te.grad.float().cpu().numpy(), tt.grad.float().numpy(),
                                       rtol=tol, atol=tol)
            n += 1
assert launches[0] == n, (launches[0], n)
for T, dev in ((torch, "cpu"), (ember, "cuda")):
    y = T.zeros(3, 4, device=dev)
    try:
        T.ops.aten._softmax_backward_data(T.zeros(3, 5, device=dev), y, 1, T.float32)
    except RuntimeError as e:
        assert "same size" in str(e), e
    else:
        raise AssertionError(f"{T.__name__}: no error")
print("ok")
"""


def test_softmax_backward_rows_on_cuda():
    run_script(SCRIPT, "test_cuda_softmax_backward", timeout=600)
