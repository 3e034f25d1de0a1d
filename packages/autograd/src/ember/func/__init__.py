"""ember.func: composable function transforms (torch.func): vmap, grad, vjp, jvp, jacrev,
jacfwd, hessian, functional_call, stack_module_state.

>>> import ember
>>> from ember.func import grad, vmap
>>> vmap(grad(lambda x: (x * x).sum()))(ember.tensor([[1., 2.], [3., 4.]])).tolist()
[[2.0, 4.0], [6.0, 8.0]]
"""
from ember.nn.utils.stateless import functional_call

from ._eager import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize, vjp
from ._module_state import replace_all_batch_norm_modules_, stack_module_state
from ._vmap import vmap


def functionalize(func, *, remove: str = "mutations"):
    """torch.func.functionalize: a program without in-place ops for tracing. Eagerly the
    results (and the writes back into inputs) are the same as func's, which is what this
    returns; ember's tracer (ember.fx, export) functionalizes its own graphs."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument "
                           f"for remove={remove}. Valid options are: remove='mutations', "
                           f"remove='mutations_and_views'")
    import functools

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapped


def debug_unwrap(tensor, *, recurse: bool = True):
    """The physical tensor under vmap's batched wrappers (one level, or all with recurse)."""
    from ._batched import BatchedTensor
    while isinstance(tensor, BatchedTensor):
        tensor = tensor._phys
        if not recurse:
            break
    return tensor

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
           "functional_call", "stack_module_state", "linearize",
           "replace_all_batch_norm_modules_", "functionalize", "debug_unwrap"]
