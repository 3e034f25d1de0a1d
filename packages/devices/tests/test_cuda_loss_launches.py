"""cross_entropy / nll_loss on cuda: forward and backward equal PyTorch's (class weights,
ignore_index, every reduction, rows past one block, classes past one block) with the nll part in
one launch each way. Scripts run in this process on a GPU and on the fake device (Triton's
interpreter, a subprocess) elsewhere: the same assertions on both."""
from cuda_script import run_script

SCRIPT = r"""
import numpy as np
import torch
import ember
import ember.cuda.kernels.base as base

launches = []
_orig = base._launch
def _count(be, kern, *a):
    launches.append(kern.__name__)
    return _orig(be, kern, *a)
base._launch = _count
import ember.cuda.kernels.loss as L
L._launch = _count

rng = np.random.default_rng(0)
ALL = (("mean", "sum", "none"), (False, True), (0.0, 0.1))
# (the interpreter is slow: the larger shapes run fewer variants)
for N, C, (reds, weights, smooth) in ((6, 5, ALL), (300, 7, (("mean",), (True,), (0.0,))),
                                      (3, 1100, (("sum",), (False,), (0.0,)))):
    x = rng.standard_normal((N, C)).astype("float32")
    t = rng.integers(0, C, N)
    t[1] = -100                                   # an ignored row
    w = rng.random(C).astype("float32") + 0.5
    for red in reds:
        for weight in (w if use else None for use in weights):
            for label_smoothing in smooth:
                outs = {}
                for lib, dev in ((torch, "cpu"), (ember, "cuda")):
                    xt = lib.tensor(x).to(dev).requires_grad_()
                    wt = None if weight is None else lib.tensor(weight).to(dev)
                    launches.clear()
                    loss = lib.nn.functional.cross_entropy(
                        xt, lib.tensor(t).to(dev), weight=wt, reduction=red,
                        label_smoothing=label_smoothing)
                    fwd = list(launches)
                    launches.clear()
                    loss.backward(lib.ones_like(loss))
                    outs[lib.__name__] = (loss.detach().cpu().numpy(),
                                          xt.grad.cpu().numpy(), fwd, list(launches))
                (a, ga, _, _), (b, gb, fwd, bwd) = outs["torch"], outs["ember"]
                np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
                np.testing.assert_allclose(gb, ga, rtol=1e-5, atol=1e-6)
                if red != "none" and label_smoothing == 0:
                    assert fwd.count("nll_reduce") == 1 and "nll_rows" not in fwd, fwd
                    assert bwd.count("nll_back_dense") == 1, bwd
"""


def test_cross_entropy_equals_torch_with_one_nll_launch_each_way():
    run_script(SCRIPT, "cuda_loss_launches")
