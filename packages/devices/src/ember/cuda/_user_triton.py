"""User Triton kernels on ember's cuda tensors (`ember.library.wrap_triton`): launched through
Triton's own launch path on ember's driver (current device and stream), with tensors passed as
raw device addresses; on the fake device, in Triton's interpreter on host memory (recorded
instead while a CUDA graph captures)."""
from __future__ import annotations

from ember._ops.registry import Tensor

from .runtime import driver as rt
from .runtime.launcher import Ptr, _HostAddr, install_driver
from .runtime.streams import current_stream_handle


def launch_user_triton(kernel, grid, args, kwargs):
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
    index = tensors[0].device.index if tensors and tensors[0].device.index is not None else None
    rt.ensure_context(index)
    if rt.FAKE:
        from .runtime.capture import fake_exec
        conv = (lambda a: _HostAddr(a.data_ptr(), a.dtype) if isinstance(a, Tensor) else a)
        call = [conv(a) for a in args]
        kw = {k: conv(v) for k, v in kwargs.items()}
        fake_exec(lambda: kernel[grid](*call, **kw), current_stream_handle(index))
        return None
    install_driver()
    conv = (lambda a: Ptr(a.data_ptr(), a.dtype) if isinstance(a, Tensor) else a)
    return kernel[grid](*[conv(a) for a in args], **{k: conv(v) for k, v in kwargs.items()})
