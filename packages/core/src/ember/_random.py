"""Random number generators: `ember.Generator`, the default generator and the global seed API.

A Generator wraps numpy's PCG64 bit generator. Streams are reproducible (same seed, same
numbers) but are not PyTorch's numbers. The state is a uint8 tensor, as in PyTorch.
"""
from __future__ import annotations

import os
import struct

import numpy as np

from ._device import device as Device

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state"]

_DEFAULT_SEED = 67280421310721  # PyTorch's default CPU seed
_MASK64 = (1 << 64) - 1
_MASK128 = (1 << 128) - 1
_STATE = struct.Struct("<QQQQQQQ")  # pcg state (2 words), increment (2), has_uint32, uint, seed
_STATE_SIZE = _STATE.size
# device packages plug in here (core never imports them): their Generator subclass by device
# type, and callbacks that manual_seed()/seed() call with the seed (ember.cuda fills both)
DEVICE_GENERATORS: dict = {}
SEED_HOOKS: list = []


class Generator:
    """A source of random numbers: pass it as `generator=` to random ops.

    >>> import ember
    >>> g = ember.Generator().manual_seed(0)
    >>> a = ember.rand(3, generator=g)
    >>> _ = g.manual_seed(0)
    >>> bool((ember.rand(3, generator=g) == a).all())
    True
    """

    def __new__(cls, device="cpu"):
        sub = DEVICE_GENERATORS.get(Device(device).type) if cls is Generator else None
        return object.__new__(sub or cls)

    def __init__(self, device="cpu"):
        self.device = Device(device)
        self._seed = _DEFAULT_SEED
        self._reset()

    def _reset(self) -> None:
        self._bits = np.random.PCG64(self._seed)
        self.np = np.random.Generator(self._bits)  # what kernels draw from

    def manual_seed(self, seed) -> Generator:
        """Seed the generator (any int; negative seeds wrap to 64 bits, as in PyTorch)."""
        seed = int(seed)
        if seed >= 1 << 64 or seed < -(1 << 63):
            raise ValueError("Overflow when unpacking long long")
        self._seed = seed & _MASK64
        self._reset()
        return self

    def seed(self) -> int:
        """Seed from the operating system's entropy; returns the seed used."""
        s = int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self):
        """The generator's state as a uint8 tensor (restore it with set_state)."""
        from ._creation_api import tensor
        st = self._bits.state
        s, inc = st["state"]["state"], st["state"]["inc"]
        raw = _STATE.pack(s & _MASK64, s >> 64, inc & _MASK64, inc >> 64, st["has_uint32"],
                          st["uinteger"], self._seed)
        import ember
        return tensor(np.frombuffer(raw, np.uint8).copy(), dtype=ember.uint8)

    def set_state(self, new_state) -> Generator:
        from ._tensor import Tensor
        if not isinstance(new_state, Tensor) or new_state.dtype.name != "uint8":
            raise TypeError("RNG state must be a ember.ByteTensor")
        if new_state.numel() != _STATE_SIZE:
            raise RuntimeError(f"Expected a CPUGeneratorImplState of size {_STATE_SIZE} but found "
                               f"the input RNG state size to be {new_state.numel()}")
        s0, s1, i0, i1, has, uint, seed = _STATE.unpack(new_state.detach().cpu().numpy().tobytes())
        self._seed = seed
        self._bits = np.random.PCG64()
        self._bits.state = {"bit_generator": "PCG64", "state": {"state": s0 | (s1 << 64),
                                                                "inc": i0 | (i1 << 64)},
                            "has_uint32": has, "uinteger": uint}
        self.np = np.random.Generator(self._bits)
        return self

    def clone_state(self) -> Generator:
        g = Generator(self.device)
        return g.set_state(self.get_state())

    def __repr__(self) -> str:
        return f"<ember._C.Generator object at {hex(id(self))}>"


default_generator = Generator()


def resolve(generator) -> np.random.Generator:
    """The numpy generator a kernel draws from: the given Generator's, else the default's."""
    if generator is None:
        return default_generator.np
    if not isinstance(generator, Generator):
        raise TypeError(f"expected a ember.Generator for 'generator', got "
                        f"{type(generator).__name__}")
    return generator.np


def manual_seed(seed) -> Generator:
    """Seed the default generator; returns it.

    >>> import ember
    >>> _ = ember.manual_seed(0); a = ember.randn(2)
    >>> _ = ember.manual_seed(0); bool((ember.randn(2) == a).all())
    True
    """
    g = default_generator.manual_seed(seed)
    for hook in SEED_HOOKS:  # device generators too, as torch.manual_seed does
        hook(int(seed))
    return g


def seed() -> int:
    """Seed the default generator nondeterministically; returns the seed."""
    s = default_generator.seed()
    for hook in SEED_HOOKS:
        hook(s)
    return s


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state (a uint8 tensor)."""
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    default_generator.set_state(new_state)
