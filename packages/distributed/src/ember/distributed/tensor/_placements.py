"""Placements of a DTensor on one mesh dim: Shard(dim), Replicate(), Partial(reduce_op)."""
from __future__ import annotations

__all__ = ["Placement", "Shard", "Replicate", "Partial", "shard_sizes", "_StridedShard"]


class Placement:
    def is_shard(self, dim=None) -> bool:
        return False

    def is_replicate(self) -> bool:
        return False

    def is_partial(self) -> bool:
        return False


class Shard(Placement):
    """Split along tensor dim `dim` into mesh-dim-size chunks (torch.chunk's sizes)."""

    def __init__(self, dim: int):
        self.dim = dim

    def is_shard(self, dim=None) -> bool:
        return dim is None or dim == self.dim

    def __eq__(self, other):
        return isinstance(other, Shard) and other.dim == self.dim

    def __hash__(self):
        return hash(("Shard", self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"


class _StridedShard(Shard):
    """Shard(dim) applied after the later mesh dims' shards of the same dim (torch's
    _StridedShard; FSDP + TP: FSDP shards the TP piece over "dp", so dp's split comes second).
    Equal to Shard(dim) for sharding rules; layout-aware in local_shape/offsets and
    redistribution."""

    def __init__(self, dim: int, split_factor: int = 1):
        super().__init__(dim)
        self.split_factor = split_factor

    def __repr__(self):
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"


class Replicate(Placement):
    def is_replicate(self) -> bool:
        return True

    def __eq__(self, other):
        return isinstance(other, Replicate)

    def __hash__(self):
        return hash("Replicate")

    def __repr__(self):
        return "Replicate()"


class Partial(Placement):
    """Each rank holds a partial value; the tensor is their reduction (`reduce_op`)."""

    def __init__(self, reduce_op: str = "sum"):
        self.reduce_op = reduce_op

    def is_partial(self) -> bool:
        return True

    def __eq__(self, other):
        return isinstance(other, Partial) and other.reduce_op == self.reduce_op

    def __hash__(self):
        return hash(("Partial", self.reduce_op))

    def __repr__(self):
        return f"Partial({self.reduce_op})"


def shard_sizes(n: int, parts: int) -> list[int]:
    """Sizes of torch.chunk(n, parts) padded with empty chunks to `parts` entries."""
    step = -(-n // parts) if n else 0
    sizes = []
    for i in range(parts):
        sizes.append(max(0, min(step, n - i * step)) if step else 0)
    return sizes
