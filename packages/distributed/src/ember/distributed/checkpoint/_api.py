"""Distributed checkpoint save/load (torch.distributed.checkpoint's API, its own file format).

A checkpoint is a directory: `__<rank>_0.safetensors` per writing rank (its pieces of each
tensor, named `<key>#<n>`) and `.metadata` (JSON: each tensor's global shape, dtype and pieces
with their offsets; plain values such as step counters and learning rates inline). A DTensor's
piece is written by one rank only (replicas along Replicate mesh dims are skipped; Partial values
are reduced first); a plain tensor is written whole by rank 0. Loading reads, for every target
tensor, the parts of the saved pieces that overlap the region this rank holds, so any saved
layout loads into any target layout, world size or a single process.
"""
from __future__ import annotations

import json
import os

import ember
from ember._tensor import Tensor

from ..tensor._dtensor import DTensor
from ..tensor._placements import Partial, Replicate, Shard
from ..tensor._redistribute import local_offsets, local_shape

__all__ = ["save", "load", "FileSystemWriter", "FileSystemReader"]

_META = ".metadata"
_PLAIN = (int, float, str, bool, type(None))


class FileSystemWriter:
    """Where save writes (torch's FileSystemWriter: a directory path)."""

    def __init__(self, path, **kwargs):
        self.path = os.fspath(path)


class FileSystemReader:
    """Where load reads (a directory path)."""

    def __init__(self, path, **kwargs):
        self.path = os.fspath(path)


def _flatten(obj, path=(), out=None):
    """{json path: leaf} for nested dicts/lists; leaves are tensors or plain values."""
    out = {} if out is None else out
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, (str, int)):
                raise TypeError(f"checkpoint: state_dict keys must be str or int, got {k!r}")
            _flatten(v, path + (k,), out)
    elif isinstance(obj, (list, tuple)) and any(isinstance(v, (Tensor, dict, list, tuple))
                                                for v in obj):
        for i, v in enumerate(obj):
            _flatten(v, path + (i,), out)
    else:
        out[json.dumps(path)] = obj
    return out


def _check_plain(key, v):
    if isinstance(v, _PLAIN):
        return
    if isinstance(v, (list, tuple)):
        for x in v:
            _check_plain(key, x)
        return
    raise TypeError(f"checkpoint: {json.loads(key)} holds a {type(v).__name__}; only tensors and "
                    "plain values (numbers, strings, lists of them) are saved (no pickling)")


def _dist():
    import ember.distributed as dist
    return dist if dist.is_initialized() else None


def _path(checkpoint_id, storage):
    p = storage.path if storage is not None else checkpoint_id
    if p is None:
        raise ValueError("checkpoint: pass checkpoint_id (a directory) or a storage writer/reader")
    return os.fspath(p)


def _writer_piece(t):
    """(local piece, offsets) this rank writes for t, or None when another rank writes it."""
    if isinstance(t, DTensor):
        if any(isinstance(p, Partial) for p in t.placements):
            t = t.redistribute(placements=[Replicate() if isinstance(p, Partial) else p
                                           for p in t.placements])
        coord = t.device_mesh.get_coordinate()
        if any(not isinstance(p, Shard) and c != 0 for p, c in zip(t.placements, coord)):
            return None
        return t.to_local().detach(), local_offsets(t.shape, t.device_mesh, t.placements)
    d = _dist()
    if d is not None and d.get_rank() != 0:
        return None
    return t.detach(), (0,) * t.dim()


def save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None,
         process_group=None, no_dist=False):
    """Write state_dict (model and optimizer state, DTensors or tensors) under checkpoint_id.
    Every rank calls it. Returns the metadata dict."""
    root = _path(checkpoint_id, storage_writer)
    d = None if no_dist else _dist()
    rank = d.get_rank() if d else 0
    os.makedirs(root, exist_ok=True)
    flat = _flatten(state_dict)
    pieces, mine, values = {}, {}, {}
    fname = f"__{rank}_0.safetensors"
    for key, v in flat.items():
        if isinstance(v, Tensor):
            w = _writer_piece(v)
            entry = {"shape": list(v.shape), "dtype": str(v.dtype).split(".")[-1], "chunks": []}
            pieces[key] = entry
            if w is not None:
                local, off = w
                name = f"{len(mine)}"
                mine[name] = local.contiguous().cpu()
                entry["chunks"].append({"file": fname, "name": name, "offsets": list(off),
                                        "sizes": list(local.shape)})
        else:
            _check_plain(key, v)
            values[key] = v
    if mine:
        from ember.utils.safetensors import save_file
        save_file(mine, os.path.join(root, fname))
    if d is not None:
        every = [None] * d.get_world_size()
        d.all_gather_object(every, pieces)
    else:
        every = [pieces]
    meta = {"format": "ember-dcp", "version": 1, "tensors": {}, "values": values}
    for key in pieces:
        chunks = [c for p in every for c in p[key]["chunks"]]
        meta["tensors"][key] = dict(pieces[key], chunks=chunks)
    if rank == 0:
        tmp = os.path.join(root, _META + ".tmp")
        with open(tmp, "w") as f:
            json.dump(meta, f)
        os.replace(tmp, os.path.join(root, _META))
    if d is not None:
        d.barrier()
    return meta


def _target_region(t):
    """(tensor to fill, its offsets in the global tensor, a fix-up to run after filling)."""
    if isinstance(t, DTensor):
        ps = t.placements
        local = t._local_tensor
        off = local_offsets(t.shape, t.device_mesh, ps)
        assert tuple(local.shape) == local_shape(t.shape, t.device_mesh, ps)
        coord = t.device_mesh.get_coordinate()
        zero = any(isinstance(p, Partial) and c != 0 for p, c in zip(ps, coord))
        return local, off, zero
    return t, (0,) * t.dim(), False


def _fill(target, off, entry, root, cache):
    """Copy the overlap of every saved piece with target's region (target at offsets off)."""
    from ember.utils.safetensors import load_file
    covered = 0
    for c in entry["chunks"]:
        lo = [max(a, b) for a, b in zip(off, c["offsets"])]
        hi = [min(a + s, b + z) for a, s, b, z in zip(off, target.shape, c["offsets"],
                                                      c["sizes"])]
        if any(h <= lw for lw, h in zip(lo, hi)) and target.dim():
            continue
        f = os.path.join(root, c["file"])
        if f not in cache:
            cache[f] = load_file(f)
        src = cache[f][c["name"]]
        dst = target
        for dim, (lw, h) in enumerate(zip(lo, hi)):
            src = src.narrow(dim, lw - c["offsets"][dim], h - lw)
            dst = dst.narrow(dim, lw - off[dim], h - lw)
        dst.copy_(src.to(dst.dtype))
        n = 1
        for lw, h in zip(lo, hi):
            n *= h - lw
        covered += n
    return covered


def load(state_dict, *, checkpoint_id=None, storage_reader=None, planner=None,
         process_group=None, no_dist=False):
    """Fill state_dict's tensors in place (and replace its plain values) from the checkpoint,
    whatever layout it was saved with. Every rank calls it."""
    root = _path(checkpoint_id, storage_reader)
    with open(os.path.join(root, _META)) as f:
        meta = json.load(f)
    if meta.get("format") != "ember-dcp":
        raise RuntimeError(f"checkpoint: {root} is not an ember distributed checkpoint")
    flat = _flatten(state_dict)
    cache: dict = {}
    for key, v in flat.items():
        if isinstance(v, Tensor):
            entry = meta["tensors"].get(key)
            if entry is None:
                raise RuntimeError(f"Missing key in checkpoint state_dict: {_dotted(key)}.")
            if list(v.shape) != entry["shape"]:
                raise RuntimeError(f"checkpoint: size mismatch for {_dotted(key)}: the checkpoint "
                                   f"has {entry['shape']}, the state_dict {list(v.shape)}")
            target, off, zero = _target_region(v)
            with ember.no_grad():
                if zero:
                    target.zero_()
                    continue
                n = _fill(target, off, entry, root, cache)
            want = 1
            for s in target.shape:
                want *= s
            if n != want:
                raise RuntimeError(f"checkpoint: {_dotted(key)} is not fully covered by the "
                                   "saved pieces")
        elif key in meta["values"]:
            _set_path(state_dict, json.loads(key), meta["values"][key])
        else:
            raise RuntimeError(f"Missing key in checkpoint state_dict: {_dotted(key)}.")
    d = None if no_dist else _dist()
    if d is not None:
        d.barrier()


def _dotted(key) -> str:
    return ".".join(str(k) for k in json.loads(key))


def _set_path(obj, path, value):
    for k in path[:-1]:
        obj = obj[k]
    last = path[-1]
    if isinstance(obj, tuple):
        raise TypeError("checkpoint: cannot load a plain value into a tuple")
    if isinstance(obj, dict) and last not in obj and str(last) in obj:
        last = str(last)
    obj[last] = tuple(value) if isinstance(obj[last], tuple) else value
