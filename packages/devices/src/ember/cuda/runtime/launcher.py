"""Triton on ember's runtime: a driver subclass without torch, and a cheap launch path.

Triton 3.6's CudaDriver.__init__ asks torch for the current device and stream; the subclass
answers from ember.cuda instead (our streams, our contexts). Its Python launch path
(JITFunction.run: binding, specialization, cache key) costs ~12 us a call; after the first launch
of a (kernel, layout key) we keep the CompiledKernel and call its C launcher directly with raw
pointers, the part that really launches (a few us).
"""
from __future__ import annotations

import os

from ..kernels.pointwise import Operand
from . import driver as rt
from .streams import current_stream_handle

_driver = None
_LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})
# CUfunction handle -> (parameter types of Triton's signature, (num_warps, num_ctas, shared),
# needs a launch attribute): what a native launch plan (runtime/native.py) packs and launches
SIGNATURES: dict = {}
# EMBER_CUDA_FAKE_PLANS=1 (the fake device with TRITON_INTERPRET=1): interpreter launches are
# cached as plans too (`FakeRun`), so the plan and native launch paths run in CI
def fake_plans() -> bool:
    """Read at each fake launch, not at import: tests turn it on after ember.cuda is loaded. A
    change drops the plan state made under the other setting (native_ops.reset_plans)."""
    on = os.environ.get("EMBER_CUDA_FAKE_PLANS") == "1"
    if on is not _FAKE_PLANS[0]:
        if _FAKE_PLANS[0] is not None:
            from .native_ops import reset_plans
            reset_plans()
        _FAKE_PLANS[0] = on
    return on


_FAKE_PLANS: list = [None]  # the setting fake_plans() last read


def install_driver():
    """Make Triton launch through ember's runtime (once, before the first launch)."""
    global _driver
    if _driver is not None:
        return _driver
    import triton
    from triton.backends.nvidia import driver as nvd

    from . import streams as _streams

    class EmberCudaDriver(nvd.CudaDriver):
        def __init__(self):  # GPUDriver.__init__ imports torch: set its hooks ourselves
            self.utils = nvd.CudaUtils()
            self.launcher_cls = nvd.CudaLauncher
            # the device of the bound context (kernels bind their tensors' device): Triton
            # keys its compiled kernels and loads their modules by it
            self.get_current_device = rt.bound_device
            self.set_current_device = rt.set_device
            self.get_current_stream = lambda idx=None: _streams.current_stream_handle(
                rt.bound_device() if idx is None else idx)
            self.get_device_capability = lambda idx=None: (
                rt.attribute(rt.current_device() if idx is None else idx,
                             "COMPUTE_CAPABILITY_MAJOR"),
                rt.attribute(rt.current_device() if idx is None else idx,
                             "COMPUTE_CAPABILITY_MINOR"))

        @staticmethod
        def is_active():
            return rt.device_count() > 0

    rt.ensure_context()
    _driver = EmberCudaDriver()
    triton.runtime.driver.set_active(_driver)
    return _driver


def direct(ck):
    """(launch function, arguments between the stream and the kernel's): Triton 3.6's C
    launcher itself when the kernel needs no scratch memory, else the CompiledKernel's run."""
    run = ck.run  # loads the module and builds the launcher on first use
    try:
        if (run.global_scratch_size == 0 and run.profile_scratch_size == 0
                and getattr(run.launch, "__name__", "") == "launch"):
            try:
                SIGNATURES[int(ck.function)] = (
                    tuple(ck.src.signature.values()), tuple(ck.packed_metadata),
                    bool(run.launch_cooperative_grid or run.launch_pdl))
            except (AttributeError, TypeError):  # another Triton: no native plans
                pass
            return run.launch, (ck.function, run.launch_cooperative_grid, run.launch_pdl, None,
                                None, ck.packed_metadata, None, None, None)
    except AttributeError:  # another Triton version: its own run is always right
        pass
    return run, (ck.function, ck.packed_metadata, None, None, None)


class Ptr:
    """A raw device address with a dtype, as Triton's first (compiling) launch wants them."""

    __slots__ = ("addr", "dtype")

    def __init__(self, addr, dtype):
        self.addr, self.dtype = addr, dtype

    def data_ptr(self):
        return self.addr


class FastLauncher:
    """Launches a JITFunction: the first call per key through Triton (which compiles), later
    ones straight through the compiled kernel's C launcher. A compiled kernel belongs to the
    context it was loaded in, so the key holds the device whose context is bound (the tensors'
    device: see kernels.base), and the launch goes to that device's current stream."""

    def __init__(self):
        self.compiled: dict = {}
        self.last = None    # (CompiledKernel, constexpr values) of the latest launch

    def fast(self, plan, args):
        """Launch a memoized plan (launch fn, prefix, constexpr values, grid, tail args)."""
        run, prefix, cvals, grid, tail = plan
        self.last = (run, prefix, cvals)  # what callers caching this launch read
        run(grid[0], grid[1] if len(grid) > 1 else 1, 1, current_stream_handle(rt.bound_device()),
            *prefix, *args, *tail, *cvals)

    def __call__(self, fn, grid, args, key, constexprs):
        ptrs = [a.addr for a in args if isinstance(a, Operand)]
        # Triton specializes pointers on 16-byte alignment: part of the key
        dev = rt.bound_device()
        full = (id(fn), key, tuple(p % 16 == 0 for p in ptrs), dev)
        if rt.FAKE and not rt.NOLAUNCH:  # Triton's interpreter on host memory
            if rt.FAKE_DEVICES > 1:  # a "compiled" kernel belongs to the context it loaded in
                if self.compiled.setdefault(full, dev) != dev:
                    raise rt.CudaError("CUDA error: invalid resource handle (a kernel loaded "
                                       "in another device's context)")
                rt.fake_check_launch(ptrs)
            call = [_HostAddr(a.addr, a.dtype) if isinstance(a, Operand) else a for a in args]
            from .capture import fake_exec  # recorded instead while the stream captures
            fake_exec(lambda: fn[grid](*call, **constexprs), current_stream_handle(None))
            self.last = None
            if fake_plans():
                kinds = tuple(a.dtype if isinstance(a, Operand) else None for a in args)
                self.last = (FakeRun(fn, kinds, tuple(constexprs), dev), (),
                             tuple(constexprs.values()))
            return
        ck = self.compiled.get(full)
        gx = grid[0]
        gy = grid[1] if len(grid) > 1 else 1
        gz = grid[2] if len(grid) > 2 else 1
        if ck is None:
            if rt.NOLAUNCH:  # host-cost profiling: a "compiled" launch that does nothing
                self.compiled[full] = self.last = (_nop, (), tuple(constexprs.values()))
                return
            install_driver()
            call = [Ptr(a.addr, a.dtype) if isinstance(a, Operand) else a for a in args]
            ck = fn[grid](*call, **constexprs)
            # launch options (num_warps, num_stages) shape the compile, not the arguments
            self.compiled[full] = self.last = direct(ck) + (tuple(
                v for k, v in constexprs.items() if k not in _LAUNCH_OPTIONS),)
            return
        self.last = ck
        run, prefix, cvals = ck
        call = [a.addr if isinstance(a, Operand) else a for a in args]
        run(gx, gy, gz, current_stream_handle(dev), *prefix, *call, *cvals)


def _nop(*args):
    return None


class _HostAddr(Ptr):
    """A host address posing as a torch tensor for Triton's interpreter (fake device)."""

    __slots__ = ()

    def untyped_storage(self):
        return self

    def cpu(self):
        return self

    def copy_(self, other):
        return self

    def new_empty(self, *a, **k):
        return _HostAddr(self.addr, self.dtype)

    def set_(self, storage, offset, size, stride):
        self.addr = storage.data_ptr()
        return self

    def storage_offset(self):
        return 0

    def size(self):
        return (1,)

    def stride(self):
        return (1,)


class FakeRun:
    """The fake device's "compiled launcher" of a kernel (EMBER_CUDA_FAKE_PLANS=1): called as
    Triton's C launcher is, (gx, gy, gz, stream, *args, *constexprs), it runs the kernel in
    Triton's interpreter on host memory. `pointers`: the dtype of each pointer argument (None
    for scalars). `calls` keeps the latest arguments (tests compare launch paths)."""

    def __init__(self, fn, pointers, names, device):
        self.fn, self.pointers, self.names, self.device = fn, pointers, names, device
        self.last_args = None

    def __call__(self, gx, gy, gz, stream, *args):
        if rt.bound_device() != self.device:
            raise rt.CudaError("CUDA error: invalid resource handle (a kernel loaded in "
                               "another device's context)")
        n = len(self.pointers)
        run, consts = args[:n], args[n:]
        self.last_args = tuple(run)
        rt.fake_check_launch([a for a, d in zip(run, self.pointers) if d is not None])
        call = [_HostAddr(a, d) if d is not None else a for a, d in zip(run, self.pointers)]
        kw = dict(zip(self.names, consts))
        from .capture import fake_exec
        fake_exec(lambda: self.fn[(gx, gy, gz)](*call, **kw), stream)
