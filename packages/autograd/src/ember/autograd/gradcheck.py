"""gradcheck / gradgradcheck: compare the engine's gradients with central finite differences.

>>> import ember
>>> x = ember.tensor([0.5, 1.5], dtype=ember.float64, requires_grad=True)
>>> ember.autograd.gradcheck(lambda x: (x * x).exp(), (x,))
True
"""
from __future__ import annotations

import warnings

import numpy as np

import ember
from ember._tensor import Tensor

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck when analytical and numerical gradients disagree."""


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _outputs(func, inputs):
    return [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor)]


def _numerical(func, inputs, wrt, eps):
    """J[o][i]: (out_numel, in_numel) arrays, by central differences on each input element."""
    # not under no_grad: gradgradcheck's function computes gradients itself
    if True:
        outs = _outputs(func, inputs)
        jac = [[np.zeros((o.numel(), inputs[i].numel())) for i in wrt] for o in outs]
        for k, i in enumerate(wrt):
            x = inputs[i].detach()
            flat = x._np.reshape(-1) if x.is_contiguous() else None
            if flat is None:
                raise ValueError("gradcheck: inputs must be contiguous")
            for j in range(flat.size):
                orig = flat[j].copy()
                flat[j] = orig - eps
                lo = [o.detach().numpy().astype(np.complex128 if o.is_complex() else np.float64)
                      .reshape(-1).copy() for o in _outputs(func, inputs)]
                flat[j] = orig + eps
                hi = [o.detach().numpy().astype(np.complex128 if o.is_complex() else np.float64)
                      .reshape(-1).copy() for o in _outputs(func, inputs)]
                flat[j] = orig
                for m in range(len(outs)):
                    jac[m][k][:, j] = (hi[m] - lo[m]) / (2 * eps)
    return jac


def _analytical(func, inputs, wrt):
    outs = _outputs(func, inputs)
    xs = [inputs[i] for i in wrt]
    jac = [[np.zeros((o.numel(), x.numel())) for x in xs] for o in outs]
    for m, o in enumerate(outs):
        if not o.requires_grad:
            continue
        for r in range(o.numel()):
            onehot = np.zeros(o.numel(), dtype=o.dtype.np)
            onehot[r] = 1
            g = ember.tensor(onehot.reshape(tuple(o.shape)), dtype=o.dtype)
            grads = ember.autograd.grad(o, xs, g, retain_graph=True, allow_unused=True)
            for k, gx in enumerate(grads):
                if gx is not None:
                    jac[m][k][r, :] = gx.detach().numpy().astype(np.float64).reshape(-1)
    return jac


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0,
              check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
              check_batched_grad: bool = False, check_batched_forward_grad: bool = False,
              check_forward_ad: bool = False, check_backward_ad: bool = True,
              fast_mode: bool = False, masked=None) -> bool:
    """True when func's gradients w.r.t. the inputs that require grad match finite differences
    (use float64 inputs); otherwise raises GradcheckError (or returns False)."""
    inputs = _as_tuple(inputs)
    wrt = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not wrt:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of the them have requires_grad=True.")
    for i in wrt:
        if inputs[i].dtype not in (ember.float64, ember.complex128):
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating "
                          f"point or complex. This check will likely fail if all the inputs are "
                          f"not of double precision floating point or complex. ", stacklevel=2)
    num = _numerical(func, inputs, wrt, eps)
    ana = _analytical(func, inputs, wrt)
    for m, (nrow, arow) in enumerate(zip(num, ana)):
        for k, (n, a) in enumerate(zip(nrow, arow)):
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                msg = (f"Jacobian mismatch for output {m} with respect to input {wrt[k]},\n"
                       f"numerical:{n}\nanalytical:{a}\n")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False,
                  raise_exception: bool = True, nondet_tol: float = 0.0,
                  check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
                  check_batched_grad: bool = False, check_fwd_over_rev: bool = False,
                  check_rev_over_rev: bool = True, fast_mode: bool = False, masked=False) -> bool:
    """gradcheck of the first derivative: checks second derivatives (create_graph backward)."""
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        outs = _outputs(func, inputs)
        grad_outputs = tuple(ember.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype,
                                          requires_grad=True) for o in outs if o.requires_grad)
    grad_outputs = _as_tuple(grad_outputs)
    n = len(inputs)

    def first(*args):
        xs, gos = args[:n], args[n:]
        outs = [o for o in _outputs(func, xs) if o.requires_grad]
        diff = [x for x in xs if isinstance(x, Tensor) and x.requires_grad]
        grads = ember.autograd.grad(outs, diff, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)
    return gradcheck(first, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
