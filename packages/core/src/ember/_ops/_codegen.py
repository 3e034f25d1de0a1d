"""Python functions generated from op schemas: `ember.add(input, other, *, alpha=1, out=None)`."""
from __future__ import annotations

__all__ = ["make_function"]


def _varargs_arg(op, as_method: bool):
    """The int-list arg that may also be passed as varargs (`x.view(2, 3)`, `zeros(2, 3)`)."""
    pos = [a for a in op.schema.args if not a.kwonly]
    want = 2 if as_method else 1
    if len(pos) == want and pos[-1].is_int_list and not pos[-1].has_default:
        return pos[-1]
    return None


def make_function(op, pyname: str, *, as_method: bool, with_out: bool, inplace_op=None):
    """inplace_op: add F.relu's trailing `inplace=False` argument, which runs that op instead."""
    from .._dispatch import call_entry as call  # (ember._C's hit path, or dispatch's call)
    args = op.schema.args
    va = _varargs_arg(op, as_method)
    ns = {"_call": call, "_op": op, "_fix": _fix_varargs, "_ip": inplace_op}
    params, names, kw_started = [], [], False
    for i, a in enumerate(args):
        if inplace_op is not None and a.kwonly and not kw_started:
            params.append("inplace=False")
        pname = a.name
        if pname == "self" and not as_method:
            pname = "input"
        names.append(pname)
        if a is va:
            params.append(f"*{pname}")
            kw_started = True
            continue
        if a.kwonly and not kw_started:
            params.append("*")
            kw_started = True
        if a.has_default:
            ns[f"_d{i}"] = a.default
            params.append(f"{pname}=_d{i}")
        else:
            params.append(pname)
    if inplace_op is not None and not kw_started:
        params.append("inplace=False")
    if with_out:
        if not kw_started:
            params.append("*")
        params.append("out=None")
    # numpy-style spellings PyTorch accepts too: x.sum(axis=0, keepdims=True)
    aliased = [n for n in ("dim", "keepdim") if n in names] if va is None else []
    if va is not None or aliased:
        params.append("**_kw")
    lines = [f"def {pyname}({', '.join(params)}):"]
    if va is not None:
        lines.append(f"    {va.name} = _fix({va.name}, _kw, {va.name!r}, {pyname!r})")
    if aliased:
        ns["_alias"] = _numpy_aliases
        targets = ", ".join(aliased)
        lines.append(f"    if _kw: {targets}, = _alias(_kw, ({targets},), {tuple(aliased)!r}, "
                     f"{pyname!r})")
    for i in op.list_idx:  # Tensor[]: a list or tuple of tensors, as PyTorch's binding checks
        ns["_seq"] = check_tensor_seq
        pos = i if as_method else i + 1
        lines.append(f"    _seq({names[i]}, {pyname!r}, {names[i]!r}, {pos}, "
                     f"{args[i].type == 'Tensor?[]'})")
    body = ", ".join(names)
    target = "(_ip if inplace else _op)" if inplace_op is not None else "_op"
    call = f"_call({target}, ({body},), {'out' if with_out else 'None'})"
    if "requires_grad" in names:
        lines.append(f"    r = {call}")
        lines.append("    return r.requires_grad_() if requires_grad else r")
    else:
        lines.append(f"    return {call}")
    exec("\n".join(lines), ns)  # noqa: S102 - generated from our own schema text
    fn = ns[pyname]
    fn.__qualname__ = ("Tensor." if as_method else "") + pyname
    fn.__module__ = "ember"
    fn.__doc__ = f"{pyname}: ``{op.schema.text}``"
    fn._opdef = op
    return fn


def check_tensor_seq(v, fname: str, name: str, position: int, none_ok: bool = False) -> None:
    """A Tensor[] argument of a public function is a list or tuple of Tensors: a generator is
    refused as PyTorch refuses it (TypeError), not read (it could be read only once)."""
    from .._tensor import Tensor
    if not isinstance(v, (list, tuple)):
        raise TypeError(f"{fname}(): argument '{name}' (position {position}) must be tuple of "
                        f"Tensors, not {type(v).__name__}")
    for j, t in enumerate(v):
        if not isinstance(t, Tensor) and not (none_ok and t is None):
            raise TypeError(f"expected Tensor as element {j} in argument {position - 1}, but got "
                            f"{type(t).__name__}")


def _fix_varargs(values, kw, name, fname):
    if kw:
        if len(kw) == 1 and name in kw and not values:
            values = kw[name]
        else:
            bad = next(k for k in kw if k != name)
            raise TypeError(f"{fname}() got an unexpected keyword argument '{bad}'")
    if len(values) == 1 and isinstance(values[0], (tuple, list)):
        values = values[0]
    return tuple(values)


_NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim"}


def _numpy_aliases(kw, values, names, fname):
    """Map axis=/keepdims= onto dim/keepdim; any other unknown keyword is a TypeError."""
    values = list(values)
    for k, v in kw.items():
        target = _NUMPY_NAMES.get(k)
        if target not in names:
            raise TypeError(f"{fname}() got an unexpected keyword argument '{k}'")
        values[names.index(target)] = v
    return values
