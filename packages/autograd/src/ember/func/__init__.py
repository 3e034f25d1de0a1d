"""ember.func: composable function transforms (torch.func): vmap, grad, vjp, jvp, jacrev,
jacfwd, hessian, functional_call, stack_module_state.

>>> import ember
>>> from ember.func import grad, vmap
>>> vmap(grad(lambda x: (x * x).sum()))(ember.tensor([[1., 2.], [3., 4.]])).tolist()
[[2.0, 4.0], [6.0, 8.0]]
"""
from ember.nn.utils.stateless import functional_call

from ._eager import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from ._module_state import stack_module_state
from ._vmap import vmap

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
           "functional_call", "stack_module_state"]
