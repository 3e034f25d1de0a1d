"""Decomposition tables for `make_fx(decomposition_table=...)`, built from the op table's own
`decomp` entries (as torch._decomp builds them from its registry)."""
from __future__ import annotations

__all__ = ["get_decompositions", "core_aten_decompositions"]


def get_decompositions(ops) -> dict:
    """{op: its decomposition} for the given op-table entries that have one."""
    return {op: op.decomp for op in ops if getattr(op, "decomp", None) is not None}


# entries whose `decomp` is the device-level copy itself, not smaller table ops: decomposing
# them would run the copy on a traced (fake) tensor's data
_NOT_COMPOSITE = ("copy_", "_to_copy")


def core_aten_decompositions() -> dict:
    """Every entry with a decomposition, keyed by the entry (but the copies: they stay)."""
    from ember._ops import OPS
    return get_decompositions({id(op): op for op in OPS.values()
                               if op.name not in _NOT_COMPOSITE}.values())
