"""Op-table calls as graph nodes: schema-ordered args -> (args, kwargs) without defaults."""
from __future__ import annotations

__all__ = ["split_op_args"]


def _is_default(v, default) -> bool:
    if type(v) is not type(default) and not (v is None or default is None):
        # 1 == 1.0 == True: only a value of the default's own type counts as the default
        if not (isinstance(v, (list, tuple)) and isinstance(default, (list, tuple))):
            return False
    if isinstance(v, (list, tuple)) and isinstance(default, (list, tuple)):
        return len(v) == len(default) and all(_is_default(a, b) for a, b in zip(v, default))
    if isinstance(v, (bool, int, float, str, complex)) or v is None:
        return v == default
    return v is default


def split_op_args(op, args: tuple) -> tuple[tuple, dict]:
    """As PyTorch prints `aten.add.Tensor(x, y, alpha = 2)`: positional args up to the last
    non-default one, keyword-only args only where they differ from their default."""
    pos, kw = [], {}
    for a, v in zip(op.schema.args, args):
        if a.kwonly:
            if not (a.has_default and _is_default(v, a.default)):
                kw[a.name] = v
        else:
            pos.append((a, v))
    while pos and pos[-1][0].has_default and _is_default(pos[-1][1], pos[-1][0].default):
        pos.pop()
    return tuple(v for _, v in pos), kw
