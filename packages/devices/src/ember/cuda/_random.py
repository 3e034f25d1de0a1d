"""The cuda generators: Philox4x32-10 (as PyTorch on CUDA), state = seed + offset.

The offset counts 32-bit Philox words, in groups of 4 (one 128-bit counter), as PyTorch's
philox offset does. A launch takes whole counters: counter c = offset / 4 + j gives four words,
which the kernels spend on 4 values (32-bit draws: float16/bfloat16/float32 samples, integer
ranges up to 2**32) or 2 values (float64 samples, wider integer ranges); value i of a launch comes
from counter offset / 4 + i // VPC. The offset then advances by 4 * ceil(n / VPC), so from one
seed `rand(a + b)` equals `cat(rand(a), rand(b))` when a is a multiple of 4 (of 2 for float64);
other splits start the second launch on a fresh counter (the unused words of the first's last
counter are skipped), so their values differ, though they are reproducible from manual_seed.
Kernels read seed and counter as launch arguments: no device memory, no syncs. The values are not
PyTorch's stream (its kernels map counters to threads differently); the distributions are.
"""
from __future__ import annotations

import os
import struct

import numpy as np

from ember._ops import registry as core
from ember._ops.registry import device as Device

from .runtime import capture as _cap
from .runtime import driver as rt

_warned: list = []


def _warn_capture() -> None:
    import warnings
    _warned.append(True)
    warnings.warn("a random op was captured into a CUDA graph: ember's kernels take the Philox "
                  "seed and counter as launch arguments, so every replay draws the numbers of "
                  "the capture (PyTorch advances the generator per replay)", stacklevel=4)


_STATE = struct.Struct("<QQ")  # seed, offset: 16 bytes, the size of PyTorch's CUDA state
_MASK64 = (1 << 64) - 1


class CudaGenerator(core.Generator):
    """`ember.Generator(device="cuda")`: a Philox generator for one GPU.

    >>> import ember
    >>> g = ember.Generator(device="cuda")
    >>> g.manual_seed(3).initial_seed()
    3
    """

    def __init__(self, device="cuda"):
        d = Device(device)
        self.device = Device("cuda", rt.current_device() if d.index is None else d.index)
        self._seed = core.DEFAULT_SEED
        self.offset = 0

    def _reset(self) -> None:
        self.offset = 0

    def take(self, n: int) -> tuple[int, int]:
        """(seed as a signed 64-bit int, first counter) for a launch drawing n 128-bit counters;
        the offset (in 32-bit words) advances by 4 n. An offset set by set_state that is not a
        multiple of 4 is rounded up first."""
        ctr = -(-self.offset // 4)
        self.offset = 4 * (ctr + n)
        if _cap.capturing and not _warned:
            _warn_capture()
        s = self._seed
        return (s - (1 << 64) if s >= 1 << 63 else s), ctr

    def manual_seed(self, seed) -> CudaGenerator:
        seed = int(seed)
        if seed >= 1 << 64 or seed < -(1 << 63):
            raise ValueError("Overflow when unpacking long long")
        self._seed = seed & _MASK64
        self.offset = 0
        return self

    def seed(self) -> int:
        s = int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)
        self.manual_seed(s)
        return s

    def get_state(self):
        """16 bytes (seed, offset) as a uint8 CPU tensor, like PyTorch's CUDA state."""
        import ember
        raw = np.frombuffer(_STATE.pack(self._seed, self.offset), np.uint8).copy()
        return ember.tensor(raw, dtype=ember.uint8)

    def set_state(self, new_state) -> CudaGenerator:
        from ember._ops.registry import Tensor
        if not isinstance(new_state, Tensor) or new_state.dtype.name != "uint8":
            raise TypeError("RNG state must be a ember.ByteTensor")
        if new_state.numel() != _STATE.size:
            raise RuntimeError(f"Expected a CUDAGeneratorImplState of size {_STATE.size} but "
                               f"found the input RNG state size to be {new_state.numel()}")
        self._seed, self.offset = _STATE.unpack(new_state.detach().cpu().numpy().tobytes())
        return self

    def clone_state(self) -> CudaGenerator:
        return CudaGenerator(self.device).set_state(self.get_state())

    @property
    def np(self) -> np.random.Generator:
        """A host generator for ops that still run on host copies: seeded from this state,
        which it advances (reproducible from manual_seed, though not batching-independent)."""
        s, ctr = self.take(1 << 32)
        return np.random.Generator(np.random.Philox(key=[s & _MASK64, 0],
                                                    counter=[ctr, 0, 0, 0]))


_defaults: dict[int, CudaGenerator] = {}


def default_generator(index: int | None = None) -> CudaGenerator:
    """The default generator of GPU `index` (the current one when None)."""
    i = rt.current_device() if index is None else index
    g = _defaults.get(i)
    if g is None:
        g = _defaults[i] = CudaGenerator(Device("cuda", i))
    return g


def generator_for(gen, dev) -> CudaGenerator:
    """The generator a launch on device dev draws from: gen, else that device's default."""
    if gen is None:
        return default_generator(dev.index or 0)
    if not isinstance(gen, core.Generator):
        raise TypeError(f"expected a ember.Generator for 'generator', got {type(gen).__name__}")
    if not isinstance(gen, CudaGenerator):
        raise RuntimeError(f"Expected a 'cuda' device type for generator but found "
                           f"'{gen.device.type}'")
    return gen


def device_indices() -> range:
    return range(max(1, rt.device_count()))


def manual_seed_all(seed: int) -> None:
    for i in device_indices():
        default_generator(i).manual_seed(seed)


def install() -> None:
    """Register with core: Generator(device="cuda") makes a CudaGenerator, and
    ember.manual_seed / ember.seed seed every GPU's default generator too."""
    core.DEVICE_GENERATORS["cuda"] = CudaGenerator
    if manual_seed_all not in core.SEED_HOOKS:
        core.SEED_HOOKS.append(manual_seed_all)
