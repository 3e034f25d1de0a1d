"""A fast callable for a captured graph: Python source like GraphModule's, but every target
(op-table entry, function, constant) bound once as a global of the generated function instead
of looked up through `ember.ops.aten.<name>.<overload>` on each call (that lookup costs more than
a small op itself)."""
from __future__ import annotations

from ember.fx.node import Node

__all__ = ["fast_callable"]


def _bound(n):
    """The full positional arguments of an op-table call (defaults filled), or None."""
    op = n.target
    if not hasattr(op, "bind") or not hasattr(op, "schema") or "out" in n.kwargs:
        return None
    try:
        return op.bind(tuple(n.args), dict(n.kwargs))
    except TypeError:
        return None


def fast_callable(gm):
    """A function (*inputs) -> tuple of outputs running gm's graph."""
    env, names, lines, params = {}, {}, [], []

    def const(obj) -> str:
        key = f"_c{len(env)}"
        env[key] = obj
        return key

    def arg(a) -> str:
        if isinstance(a, Node):
            return names[a]
        if isinstance(a, tuple):
            return "(" + "".join(arg(x) + ", " for x in a) + ")"
        if isinstance(a, list):
            return "[" + ", ".join(arg(x) for x in a) + "]"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{k!r}: {arg(v)}" for k, v in a.items()) + "}"
        if isinstance(a, (int, float, bool, str, type(None))) and not isinstance(a, float) or \
                (isinstance(a, float) and a == a and a not in (float("inf"), float("-inf"))):
            return repr(a)
        return const(a)

    for i, n in enumerate(gm.graph.nodes):
        v = f"v{i}"
        if n.op == "placeholder":
            names[n] = v
            params.append(v)
        elif n.op == "get_attr":
            obj = gm
            for part in n.target.split("."):
                obj = getattr(obj, part)
            names[n] = const(obj)
        elif n.op == "call_function":
            full = _bound(n)
            if full is not None:  # an op-table entry: straight to dispatch, schema order
                lines.append(f"    {v} = _call({const(n.target)}, {arg(tuple(full))})")
            else:
                a = ", ".join([arg(x) for x in n.args] +
                              [f"{k}={arg(x)}" for k, x in n.kwargs.items()])
                lines.append(f"    {v} = {const(n.target)}({a})")
            names[n] = v
        elif n.op == "call_method":
            a = ", ".join([arg(x) for x in n.args[1:]] +
                          [f"{k}={arg(x)}" for k, x in n.kwargs.items()])
            lines.append(f"    {v} = {arg(n.args[0])}.{n.target}({a})")
            names[n] = v
        elif n.op == "output":
            lines.append(f"    return {arg(n.args[0])}")
        else:
            return gm  # call_module: the GraphModule runs it
    from ember._dispatch import call
    env["_call"] = call
    src = f"def _run({', '.join(params)}):\n" + ("\n".join(lines) or "    return ()") + "\n"
    exec(compile(src, "<ember._dynamo graph>", "exec"), env)  # noqa: S102
    env["_run"].graph_module = gm
    return env["_run"]
