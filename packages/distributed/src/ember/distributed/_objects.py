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


def _to_tensor(obj):
    from ember import Tensor
    raw = pickle.dumps(obj)
    return Tensor._from_np(np.frombuffer(raw, np.uint8).copy())


def _from_tensor(t, n):
    return _loads(t._np[:n].tobytes())


def _sizes(pg, n, group):
    import ember
    mine = ember.tensor([n], dtype=ember.int64)
    sizes = [ember.zeros(1, dtype=ember.int64) for _ in range(pg.size())]
    all_gather(sizes, mine, group=group)
    return [int(s.item()) for s in sizes]


def all_gather_object(object_list, obj, group=None) -> None:
    """object_list[i] = rank i's `obj`, on every rank."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    import ember
    pg = _resolve(group)
    t = _to_tensor(obj)
    sizes = _sizes(pg, t.numel(), group)
    big = max(sizes)
    padded = ember.zeros(big, dtype=ember.uint8)
    padded[:t.numel()] = t
    outs = [ember.zeros(big, dtype=ember.uint8) for _ in sizes]
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
    ts = [_to_tensor(o) for o in object_list] if me else []
    sizes = ember.tensor([t.numel() for t in ts] if me else [0] * len(object_list),
                         dtype=ember.int64)
    broadcast(sizes, group=group, group_src=s)
    data = ember.cat(ts) if me and ts else ember.zeros(int(sizes.sum().item()),
                                                       dtype=ember.uint8)
    broadcast(data, group=group, group_src=s)
    if not me:
        off, raw = 0, data._np
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
    t = _to_tensor(obj)
    sizes = _sizes(pg, t.numel(), group)
    big = max(sizes)
    padded = ember.zeros(big, dtype=ember.uint8)
    padded[:t.numel()] = t
    outs = [ember.zeros(big, dtype=ember.uint8) for _ in sizes] if pg.rank() == d else None
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
    ts = [_to_tensor(o) for o in scatter_object_input_list] if me else []
    big = ember.tensor([max(t.numel() for t in ts) if me else 0], dtype=ember.int64)
    broadcast(big, group=group, group_src=s)
    n = int(big.item())
    ins = None
    if me:
        ins = []
        for t in ts:
            p = ember.zeros(n + 8, dtype=ember.uint8)
            p[:8] = ember.tensor(np.frombuffer(np.int64(t.numel()).tobytes(), np.uint8).copy())
            p[8:8 + t.numel()] = t
            ins.append(p)
    out = ember.zeros(n + 8, dtype=ember.uint8)
    scatter(out, ins, group=group, group_src=s)
    raw = out._np
    ln = int(np.frombuffer(raw[:8].tobytes(), np.int64)[0])
    scatter_object_output_list[0] = _loads(raw[8:8 + ln].tobytes())


def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None):
    import ember
    ts = [_to_tensor(o) for o in object_list]
    sizes = ember.tensor([t.numel() for t in ts], dtype=ember.int64)
    send(sizes, dst, group, group_dst=group_dst)
    send(ember.cat(ts) if ts else ember.zeros(0, dtype=ember.uint8), dst, group,
         group_dst=group_dst)


def recv_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Receive objects sent by send_object_list; returns the sender's rank."""
    import ember
    sizes = ember.zeros(len(object_list), dtype=ember.int64)
    sender = recv(sizes, src, group, group_src=group_src)
    data = ember.zeros(int(sizes.sum().item()), dtype=ember.uint8)
    recv(data, sender if group is None else None, group,
         group_src=None if group is None else _resolve(group).ranks.index(sender))
    off, raw = 0, data._np
    for i, n in enumerate(sizes.tolist()):
        object_list[i] = _loads(raw[off:off + n].tobytes())
        off += n
    return sender
