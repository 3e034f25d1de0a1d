"""`ember.optim.Optimizer`: parameter groups, per-parameter state, state_dict in PyTorch's format,
step hooks. Concrete optimizers implement `step` with plain tensor ops under no_grad.
"""
from __future__ import annotations

import copy
import functools
import itertools
from collections import OrderedDict, defaultdict

import ember
from ember import _dispatch
from ember._tensor import Tensor

__all__ = ["Optimizer", "required", "register_optimizer_step_pre_hook",
           "register_optimizer_step_post_hook"]


class _RequiredParameter:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()
_GLOBAL_PRE_HOKS: OrderedDict = OrderedDict()
_GLOBAL_POST_HOOKS: OrderedDict = OrderedDict()
_hook_ids = itertools.count()


class _Handle:
    def __init__(self, hooks: dict):
        self.hooks = hooks
        self.id = next(_hook_ids)

    def remove(self) -> None:
        self.hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _add(hooks, fn):
    h = _Handle(hooks)
    hooks[h.id] = fn
    return h


def register_optimizer_step_pre_hook(hook) -> _Handle:
    """A hook run before every optimizer's step: hook(optimizer, args, kwargs)."""
    return _add(_GLOBAL_PRE_HOKS, hook)


def register_optimizer_step_post_hook(hook) -> _Handle:
    return _add(_GLOBAL_POST_HOOKS, hook)


def _with_hooks(step):
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        for hook in itertools.chain(list(_GLOBAL_PRE_HOKS.values()),
                                    list(self._optimizer_step_pre_hooks.values())):
            r = hook(self, args, kwargs)
            if r is not None:
                if not (isinstance(r, tuple) and len(r) == 2):
                    raise RuntimeError(f"{hook} must return None or a tuple of (new_args, "
                                       f"new_kwargs), but got {r}.")
                args, kwargs = r
        out = step(self, *args, **kwargs)
        self._opt_called = True
        for hook in itertools.chain(list(self._optimizer_step_post_hooks.values()),
                                    list(_GLOBAL_POST_HOOKS.values())):
            hook(self, args, kwargs)
        return out
    wrapper._ember_hooked = True
    return wrapper


class Optimizer:
    """Base class of all optimizers.

    >>> import ember
    >>> w = ember.zeros(2, requires_grad=True)
    >>> opt = ember.optim.SGD([w], lr=0.1)
    >>> (w - 1).square().sum().backward(); opt.step()
    >>> w.tolist()
    [0.2, 0.2]
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_ember_hooked", False):
            cls.step = _with_hooks(step)

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self._optimizer_step_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_step_post_hooks: OrderedDict = OrderedDict()
        self._optimizer_state_dict_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_state_dict_post_hooks: OrderedDict = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_load_state_dict_post_hooks: OrderedDict = OrderedDict()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {type(params).__name__}")
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for g in param_groups:
            self.add_param_group(g)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
                     "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
                     "_optimizer_load_state_dict_pre_hooks",
                     "_optimizer_load_state_dict_post_hooks"):
            self.__dict__.setdefault(name, OrderedDict())

    def __repr__(self) -> str:
        s = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += "\n" + f"Parameter Group {i}"
            for key in sorted(group.keys()):
                if key != "params":
                    s += "\n" + f"    {key}: {group[key]}"
        return s + "\n)"

    # ---- groups ------------------------------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for p in param_group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + type(p).__name__)
            leafish = p.is_leaf or p.retains_grad
            if not self.defaults.get("differentiable", None) and not leafish:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        params = param_group["params"]
        if len(params) != len({id(p) for p in params}):
            import warnings
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
        if not seen.isdisjoint(id(p) for p in param_group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # ---- hooks --------------------------------------------------------------------------------
    def register_step_pre_hook(self, hook) -> _Handle:
        return _add(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook) -> _Handle:
        return _add(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook, prepend=False) -> _Handle:
        return _add(self._optimizer_state_dict_pre_hooks, hook)

    def register_state_dict_post_hook(self, hook, prepend=False) -> _Handle:
        return _add(self._optimizer_state_dict_post_hooks, hook)

    def register_load_state_dict_pre_hook(self, hook, prepend=False) -> _Handle:
        return _add(self._optimizer_load_state_dict_pre_hooks, hook)

    def register_load_state_dict_post_hook(self, hook, prepend=False) -> _Handle:
        return _add(self._optimizer_load_state_dict_post_hooks, hook)

    # ---- state dict ---------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}"""
        for hook in self._optimizer_state_dict_pre_hooks.values():
            hook(self)
        index: dict = {}
        start = 0

        def pack(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                index.setdefault(id(p), i)
            packed["params"] = [index[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed
        groups = [pack(g) for g in self.param_groups]
        state = {index[id(k)] if isinstance(k, Tensor) else k: v
                 for k, v in self.state.items()}
        sd = {"state": state, "param_groups": groups}
        for hook in self._optimizer_state_dict_post_hooks.values():
            r = hook(self, sd)
            if r is not None:
                sd = r
        return sd

    @staticmethod
    def _cast(param, value, key=None):
        if isinstance(value, Tensor):
            if key == "step":
                return value
            if param.is_floating_point():
                return value.to(dtype=param.dtype, device=param.device)
            return value.to(device=param.device)
        if isinstance(value, dict):
            return {k: Optimizer._cast(param, v, k) for k, v in value.items()}
        return value

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = state_dict.copy()
        for hook in self._optimizer_load_state_dict_pre_hooks.values():
            r = hook(self, state_dict)
            if r is not None:
                state_dict = r
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = {old: p for g, s in zip(groups, saved_groups)
                  for old, p in zip(s["params"], g["params"])}
        state: defaultdict = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                state[p] = self._cast(p, v)
            else:
                state[k] = v
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            new_groups.append(s)
        self.__setstate__({"state": state, "param_groups": new_groups})
        for hook in self._optimizer_load_state_dict_post_hooks.values():
            hook(self)

    # ---- gradients ----------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if p.grad.grad_fn is not None:
                        p.grad = p.grad.detach()
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()

    def step(self, closure=None):
        raise NotImplementedError

    @staticmethod
    def _closure_loss(closure):
        if closure is None:
            return None
        with ember.enable_grad():
            return closure()


def _get_value(x) -> float:
    if x.__class__ is Tensor and x.device.type == "cpu" and x.numel() == 1:
        return x._np.item()  # the step counter: no dispatch for a host scalar
    return x.item() if isinstance(x, Tensor) else x


def _inc_step(t) -> None:
    """step_t += 1 on a state step counter: on a plain CPU scalar (the usual case) straight on
    its memory with the version bump an in-place op makes; through the op otherwise (a dispatch
    mode watching, a capturable device step, a tensor that requires grad)."""
    if (t.__class__ is Tensor and t.device.type == "cpu" and not t._requires_grad
            and not _dispatch.special[0]):
        t._np[...] += 1
        t._bump()
    else:
        t.add_(1)


def _step_tensor():
    return ember.tensor(0.0, dtype=ember.float32)


def _use_grad(step):
    """Run an optimizer's step under no_grad (what PyTorch's _use_grad_for_differentiable does)."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        with ember.no_grad():
            return step(self, *args, **kwargs)
    return wrapper
