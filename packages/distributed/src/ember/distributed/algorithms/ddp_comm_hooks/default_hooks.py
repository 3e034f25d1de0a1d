"""Built-in DDP comm hooks (torch.distributed.algorithms.ddp_comm_hooks.default_hooks):
allreduce_hook (the default behaviour as a hook), fp16_compress_hook and bf16_compress_hook
(all-reduce in half precision: half the bytes), and the wrappers that add compression to
another hook.

>>> # ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
"""
from __future__ import annotations

import ember

from ..._collectives import all_reduce
from ..._group import _resolve
from ..._types import Future, ReduceOp

__all__ = ["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook",
           "fp16_compress_wrapper", "bf16_compress_wrapper"]


def _allreduce_fut(process_group, tensor) -> Future:
    """All-reduce tensor divided by the group size, asynchronously: a Future of the tensor."""
    g = _resolve(process_group)
    tensor.div_(g.size())
    work = all_reduce(tensor, ReduceOp.SUM, group=g, async_op=True)
    return work.get_future().then(lambda f: tensor)


def allreduce_hook(process_group, bucket) -> Future:
    """Average the bucket over the group (state: the process group, or None for the default)."""
    return _allreduce_fut(process_group, bucket.buffer())


def _compress_hook(dtype, process_group, bucket) -> Future:
    buf = bucket.buffer()
    small = buf.to(dtype)

    def back(f):
        with ember.no_grad():
            buf.copy_(small)
        return buf
    return _allreduce_fut(process_group, small).then(back)


def fp16_compress_hook(process_group, bucket) -> Future:
    """Average the bucket in float16 (cast back to the gradients' dtype after)."""
    return _compress_hook(ember.float16, process_group, bucket)


def bf16_compress_hook(process_group, bucket) -> Future:
    """Average the bucket in bfloat16 (cast back to the gradients' dtype after)."""
    return _compress_hook(ember.bfloat16, process_group, bucket)


def _wrapper(dtype, hook):
    def wrapped(state, bucket):
        buf = bucket.buffer()
        bucket.set_buffer(buf.to(dtype))
        fut = hook(state, bucket)

        def back(f):
            r = f.value()
            r = r[0] if isinstance(r, (list, tuple)) else r
            with ember.no_grad():
                buf.copy_(r)
            return buf
        return fut.then(back)
    return wrapped


def fp16_compress_wrapper(hook):
    """A hook that runs `hook` on a float16 copy of the bucket."""
    return _wrapper(ember.float16, hook)


def bf16_compress_wrapper(hook):
    """A hook that runs `hook` on a bfloat16 copy of the bucket."""
    return _wrapper(ember.bfloat16, hook)
