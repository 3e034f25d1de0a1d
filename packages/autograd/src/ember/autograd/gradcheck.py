"""gradcheck / gradgradcheck: compare the engine's gradients with central finite differences.

Complex inputs and outputs are checked as PyTorch does: as real functions of the real and
imaginary parts, with gradients in PyTorch's convention (conjugate Wirtinger).

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


def _parts(t) -> tuple:
    """The real directions of one element: (1,) for a real tensor, (1, 1j) for a complex one
    (PyTorch checks a complex function as a real one of the real and imaginary parts)."""
    return (1, 1j) if t.dtype.is_complex else (1,)


def _real_vec(t) -> np.ndarray:
    """t's values as a float64 vector; a complex element becomes (re, im)."""
    a = t.detach().numpy()
    if np.iscomplexobj(a):
        return np.stack([a.real, a.imag], -1).astype(np.float64).reshape(-1)
    return a.astype(np.float64).reshape(-1)


def _numerical(func, inputs, wrt, eps):
    """J[o][i]: (out reals, in reals) arrays, by central differences on each real direction of
    each input element. Not under no_grad: gradgradcheck's function computes gradients."""
    outs = _outputs(func, inputs)
    jac = [[np.zeros((o.numel() * len(_parts(o)), inputs[i].numel() * len(_parts(inputs[i]))))
            for i in wrt] for o in outs]
    for k, i in enumerate(wrt):
        x = inputs[i].detach()
        if not x.is_contiguous():
            raise ValueError("gradcheck: inputs must be contiguous")
        flat = x._np.reshape(-1)
        parts = _parts(x)
        for j in range(flat.size):
            orig = flat[j].copy()
            for p, d in enumerate(parts):
                flat[j] = orig - eps * d
                lo = [_real_vec(o).copy() for o in _outputs(func, inputs)]
                flat[j] = orig + eps * d
                hi = [_real_vec(o).copy() for o in _outputs(func, inputs)]
                flat[j] = orig
                for m in range(len(outs)):
                    jac[m][k][:, j * len(parts) + p] = (hi[m] - lo[m]) / (2 * eps)
    return jac


def _analytical(func, inputs, wrt):
    """The same Jacobians from the engine: a grad_output of 1 (1j) on one output element gives
    the gradient of its real (imaginary) part; a complex input's gradient dL/dre + i dL/dim
    (PyTorch's convention) fills its two columns."""
    outs = _outputs(func, inputs)
    xs = [inputs[i] for i in wrt]
    jac = [[np.zeros((o.numel() * len(_parts(o)), x.numel() * len(_parts(x)))) for x in xs]
           for o in outs]
    for m, o in enumerate(outs):
        if not o.requires_grad:
            continue
        parts = _parts(o)
        for r in range(o.numel()):
            for p, d in enumerate(parts):
                onehot = np.zeros(o.numel(), dtype=o.dtype.np)
                onehot[r] = d
                g = ember.tensor(onehot.reshape(tuple(o.shape)), dtype=o.dtype)
                grads = ember.autograd.grad(o, xs, g, retain_graph=True, allow_unused=True)
                for k, gx in enumerate(grads):
                    if gx is not None:
                        jac[m][k][r * len(parts) + p, :] = _real_vec(gx)
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


def _randn(rng, o):
    a = rng.standard_normal(tuple(o.shape))
    return a + 1j * rng.standard_normal(tuple(o.shape)) if o.dtype.is_complex else a


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
        grad_outputs = tuple(ember.tensor(_randn(rng, o), dtype=o.dtype, requires_grad=True)
                             for o in outs if o.requires_grad)
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
