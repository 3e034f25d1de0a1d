"""Dynamic-shape specifications for export, as torch.export's: `Dim`, derived dims (`2 * b`),
`Dim.AUTO` / `Dim.STATIC` / `Dim.DYNAMIC`, `dims(...)` and `ShapesCollection`."""
from __future__ import annotations

import sys
from enum import Enum

__all__ = ["Dim", "dims", "ShapesCollection", "UserError"]

INT_OO = sys.maxsize  # "no upper bound" (PyTorch prints int_oo)


class UserError(RuntimeError):
    """A user's export specification that the program contradicts (torch._dynamo.exc.UserError)."""


class _DimHint(Enum):
    AUTO = "AUTO"
    STATIC = "STATIC"
    DYNAMIC = "DYNAMIC"

    def __repr__(self) -> str:
        return f"DimHint({self.value})"

    __str__ = __repr__


class Dim:
    """A named dynamic dimension with an inclusive range.

    >>> batch = Dim("batch", min=1, max=64)
    >>> batch
    Dim('batch', min=1, max=64)
    """

    AUTO = _DimHint.AUTO
    STATIC = _DimHint.STATIC
    DYNAMIC = _DimHint.DYNAMIC

    def __init__(self, name: str, *, min: int | None = None, max: int | None = None):
        lo = 0 if min is None else int(min)
        hi = INT_OO if max is None else int(max)
        if hi <= lo:
            raise UserError(f"Cannot create Dim with inconsistent min={min}, max={max}")
        if not name.isidentifier():
            raise UserError(f"Dim name must be a valid identifier, got {name}")
        self.__name__, self.min, self.max = name, lo, hi

    def __repr__(self) -> str:
        hi = "int_oo" if self.max == INT_OO else self.max
        return f"Dim('{self.__name__}', min={self.min}, max={hi})"

    __str__ = __repr__

    # derived dims: a * d + b with integers a > 0, b
    def __mul__(self, a: int) -> _DerivedDim:
        return _DerivedDim(self, int(a), 0)

    __rmul__ = __mul__

    def __add__(self, b: int) -> _DerivedDim:
        return _DerivedDim(self, 1, int(b))

    __radd__ = __add__

    def __sub__(self, b: int) -> _DerivedDim:
        return _DerivedDim(self, 1, -int(b))

    def value(self, root_value: int) -> int:
        return root_value

    @property
    def root(self) -> Dim:
        return self


class _DerivedDim(Dim):
    """`a * root + b`: sized from its root's value (PyTorch's _DerivedDim)."""

    def __init__(self, root: Dim, a: int, b: int):
        if not isinstance(a, int) or a <= 0:
            raise UserError(f"Cannot derive a dim from {root.__name__} by a factor of {a}")
        self._root, self.a, self.b = root.root, a * getattr(root, "a", 1), \
            a * getattr(root, "b", 0) + b
        self.__name__ = self._expr(self._root.__name__)
        self.min = self.a * self._root.min + self.b
        self.max = INT_OO if self._root.max == INT_OO else self.a * self._root.max + self.b

    def _expr(self, x: str) -> str:
        s = x if self.a == 1 else f"{self.a}*{x}"
        return s if self.b == 0 else f"{s} + {self.b}" if self.b > 0 else f"{s} - {-self.b}"

    def __repr__(self) -> str:
        return self.__name__

    @property
    def root(self) -> Dim:
        return self._root

    def value(self, root_value: int) -> int:
        return self.a * root_value + self.b


def dims(*names: str, min: int | None = None, max: int | None = None) -> tuple[Dim, ...]:
    """Several dims of one range: `batch, seq = dims("batch", "seq", max=512)`."""
    return tuple(Dim(n, min=min, max=max) for n in names)


class ShapesCollection:
    """Dynamic shapes keyed by the input tensors themselves, turned into the `dynamic_shapes`
    argument of `export` for given args: `sc[x] = {0: batch}; export(m, (x,),
    dynamic_shapes=sc)`."""

    def __init__(self):
        self._shapes: dict[int, tuple] = {}

    def __setitem__(self, t, shape) -> None:
        self._shapes[id(t)] = (t, shape)

    def __getitem__(self, t):
        return self._shapes[id(t)][1]

    def __len__(self) -> int:
        return len(self._shapes)

    def dynamic_shapes(self, m, args: tuple, kwargs: dict | None = None):
        """The spec with the structure of (args, kwargs): each tensor's entry or None."""
        used = set()

        def walk(x):
            if isinstance(x, (tuple, list)):
                return type(x)(walk(e) for e in x)
            if isinstance(x, dict):
                return {k: walk(v) for k, v in x.items()}
            hit = self._shapes.get(id(x))
            if hit is None:
                return None
            used.add(id(x))
            return hit[1]

        spec = walk(tuple(args)) if not kwargs else (walk(tuple(args)), walk(dict(kwargs)))
        if len(used) != len(self._shapes):
            raise ValueError("Some tensors that were assigned shapes were not found in args. "
                             "Maybe such tensors were copied when passing them as args?")
        return spec
