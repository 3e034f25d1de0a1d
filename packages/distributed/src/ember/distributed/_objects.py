"""Collectives on picklable Python objects (*_object / *_object_list), sent as uint8 tensors.

Received pickles are loaded by a restricted unpickler that builds only plain data (numbers,
strings, bytes, lists, tuples, dicts, sets, ember tensors, numpy arrays): a peer cannot make this
rank run code. `allow_unsafe_object_unpickling(True)` (or EMBER_DIST_UNSAFE_UNPICKLE=1) opts in
to arbitrary objects, as PyTorch does by default.
"""
from __future__ import annotations

import io
import os
import pickle

import numpy as np

from ._collectives import all_gather, broadcast, gather, recv, scatter, send
from ._group import _resolve
from ._types import GroupMember

__all__ = ["all_gather_object", "broadcast_object_list", "gather_object",
           "scatter_object_list", "send_object_list", "recv_object_list",
           "allow_unsafe_object_unpickling"]

_SAFE = {
    "builtins": {"list", "dict", "set", "frozenset", "tuple", "int", "float", "complex", "str",
                 "bytes", "bytearray", "bool", "slice", "range", "NoneType"},
    "collections": {"OrderedDict"},
    "datetime": {"timedelta", "datetime", "date"},
    "ember._serialize_tensor": {"rebuild_tensor", "_rebuild_meta"},
    "numpy": {"ndarray", "dtype"},
    "numpy.core.multiarray": {"_reconstruct", "scalar"},
    "numpy._core.multiarray": {"_reconstruct", "scalar"},
    "numpy.dtypes": {"Float32DType", "Float64DType", "Int64DType", "Int32DType",
                     "UInt8DType", "BoolDType", "Float16DType", "Int8DType", "Int16DType"},
}
_unsafe = [os.environ.get("EMBER_DIST_UNSAFE_UNPICKLE", "") == "1"]


def allow_unsafe_object_unpickling(enabled: bool = True) -> None:
    """Let *_object collectives unpickle any object (code included) from peers."""
    _unsafe[0] = bool(enabled)


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if name in _SAFE.get(module, ()):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"ember.distributed: refusing to unpickle {module}.{name} received from a peer "
            "(only plain data is accepted; call "
            "ember.distributed.allow_unsafe_object_unpickling(True) to accept any object)")


def _loads(raw: bytes):
    if _unsafe[0]:
        return pickle.loads(raw)
    return _PlainUnpickler(io.BytesIO(raw)).load()


def _dev(group, device):
    """Where the pickles travel: `device` if given, else the group's own device (cuda's current
    device for an NCCL-only group, as torch uses with NCCL), else None (cpu)."""
    import ember
    if device is not None:
        return ember.device(device)
    from ._collectives import _comm_device
    if _comm_device(group) == "cuda":
        return ember.device("cuda", ember.cuda.current_device())
    return None


def _to_tensor(obj, dev=None):
    from ember import Tensor
    raw = pickle.dumps(obj)
    t = Tensor._from_np(np.frombuffer(raw, np.uint8).copy())
    return t if dev is None else t.to(dev)


def _host(t):
    return t._np if t.device.type == "cpu" else t.cpu()._np


def _from_tensor(t, n):
    return _loads(_host(t)[:n].tobytes())


def _sizes(pg, n, group, dev=None):
    import ember
    mine = ember.tensor([n], dtype=ember.int64, device=dev)
    sizes = [ember.zeros(1, dtype=ember.int64, device=dev) for _ in range(pg.size())]
    all_gather(sizes, mine, group=group)
    return [int(s.item()) for s in sizes]


def all_gather_object(object_list, obj, group=None) -> None:
    """object_list[i] = rank i's `obj`, on every rank."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    import ember
    pg = _resolve(group)
    dev = _dev(group, None)
    t = _to_tensor(obj, dev)
    sizes = _sizes(pg, t.numel(), group, dev)
    big = max(sizes)
    padded = ember.zeros(big, dtype=ember.uint8, device=dev)
    padded[:t.numel()] = t
    outs = [ember.zeros(big, dtype=ember.uint8, device=dev) for _ in sizes]
    all_gather(outs, padded, group=group)
    for i, (o, n) in enumerate(zip(outs, sizes)):
        object_list[i] = _from_tensor(o, n)


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Every rank's object_list gets rank `src`'s objects (lists of equal length)."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    import ember
    pg = _resolve(group)
    s = group_src if group_src is not None else (0 if src is None else
                                                 pg.ranks.index(src))
    me = pg.rank() == s
    dev = _dev(group, device)
    ts = [_to_tensor(o, dev) for o in object_list] if me else []
    sizes = ember.tensor([t.numel() for t in ts] if me else [0] * len(object_list),
                         dtype=ember.int64, device=dev)
    broadcast(sizes, group=group, group_src=s)
    data = ember.cat(ts) if me and ts else ember.zeros(int(sizes.sum().item()),
                                                       dtype=ember.uint8, device=dev)
    broadcast(data, group=group, group_src=s)
    if not me:
        off, raw = 0, _host(data)
        for i, n in enumerate(sizes.tolist()):
            object_list[i] = _loads(raw[off:off + n].tobytes())
            off += n


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """object_gather_list[i] on rank `dst` = rank i's `obj`."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    import ember
    pg = _resolve(group)
    d = group_dst if group_dst is not None else pg.ranks.index(0 if dst is None else dst)
    dev = _dev(group, None)
    t = _to_tensor(obj, dev)
    sizes = _sizes(pg, t.numel(), group, dev)
    big = max(sizes)
    padded = ember.zeros(big, dtype=ember.uint8, device=dev)
    padded[:t.numel()] = t
    outs = [ember.zeros(big, dtype=ember.uint8, device=dev) for _ in sizes] \
        if pg.rank() == d else None
    gather(padded, outs, group=group, group_dst=d)
    if pg.rank() == d:
        for i, (o, n) in enumerate(zip(outs, sizes)):
            object_gather_list[i] = _from_tensor(o, n)


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None,
                        group=None, group_src=None):
    """scatter_object_output_list[0] on rank i = rank `src`'s scatter_object_input_list[i]."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    import ember
    pg = _resolve(group)
    s = group_src if group_src is not None else pg.ranks.index(0 if src is None else src)
    me = pg.rank() == s
    dev = _dev(group, None)
    ts = [_to_tensor(o) for o in scatter_object_input_list] if me else []
    big = ember.tensor([max(t.numel() for t in ts) if me else 0], dtype=ember.int64, device=dev)
    broadcast(big, group=group, group_src=s)
    n = int(big.item())
    ins = None
    if me:
        ins = []
        for t in ts:
            p = ember.zeros(n + 8, dtype=ember.uint8)
            p[:8] = ember.tensor(np.frombuffer(np.int64(t.numel()).tobytes(), np.uint8).copy())
            p[8:8 + t.numel()] = t
            ins.append(p if dev is None else p.to(dev))
    out = ember.zeros(n + 8, dtype=ember.uint8, device=dev)
    scatter(out, ins, group=group, group_src=s)
    raw = _host(out)
    ln = int(np.frombuffer(raw[:8].tobytes(), np.int64)[0])
    scatter_object_output_list[0] = _loads(raw[8:8 + ln].tobytes())


def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None):
    import ember
    dev = _dev(group, device)
    ts = [_to_tensor(o, dev) for o in object_list]
    sizes = ember.tensor([t.numel() for t in ts], dtype=ember.int64, device=dev)
    send(sizes, dst, group, group_dst=group_dst)
    send(ember.cat(ts) if ts else ember.zeros(0, dtype=ember.uint8, device=dev), dst, group,
         group_dst=group_dst)


def recv_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Receive objects sent by send_object_list; returns the sender's rank."""
    import ember
    dev = _dev(group, device)
    sizes = ember.zeros(len(object_list), dtype=ember.int64, device=dev)
    sender = recv(sizes, src, group, group_src=group_src)
    data = ember.zeros(int(sizes.sum().item()), dtype=ember.uint8, device=dev)
    recv(data, sender if group is None else None, group,
         group_src=None if group is None else _resolve(group).ranks.index(sender))
    off, raw = 0, _host(data)
    for i, n in enumerate(sizes.tolist()):
        object_list[i] = _loads(raw[off:off + n].tobytes())
        off += n
    return sender
