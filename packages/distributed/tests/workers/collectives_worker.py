"""Worker (run under mpiexec): every collective of ember.distributed on CPU tensors against a
single-process numpy reference built from all ranks' inputs (each rank can rebuild them all).
A failed check ends the job (MPI_Abort) and every wait gives up within 60 s: a run never hangs."""
import datetime

import numpy as np
from worker_check import check as _check
from worker_check import finish

import ember
import ember.distributed as dist

# Every wait of the run gives up within a minute (the harness allows 180 s): a rank that skips or
# reorders a collective makes its peers raise DistBackendError here, not hang for the default
# 10 minutes.
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
R, N = dist.get_rank(), dist.get_world_size()
# The timeouts of the groups whose collectives rank 0 enters alone: it waits that long, then
# meets the peers in a world barrier; after it the peers' whole collective (for
# large_messages_on_the_comm_thread a 1 MiB all_reduce in pieces, with 4 ranks on a loaded 2-core
# machine: 1 s timed out there under CI load) must complete within it. The late waits of the
# works that timed out give them LATE.
ALONE, ALONE_SMALL = 5.0, 2.0
LATE = datetime.timedelta(seconds=60)


check = _check(R)


def data(rank, shape, dtype="float32", salt=0):
    """Rank `rank`'s input: the same on every rank that asks."""
    rng = np.random.default_rng(1000 * salt + rank)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith("int") or dtype.startswith("uint"):
        return rng.integers(1, 7, shape).astype(dtype)
    return (rng.random(shape) * 4 - 2).astype(np.float32 if dtype == "bfloat16" else dtype)


def T(a, dtype=None):
    t = ember.tensor(a)
    return t.to(getattr(ember, dtype)) if dtype else t


def close(t, ref, tol=1e-5):
    got = t.float().numpy() if t.dtype == ember.bfloat16 else t.numpy()
    assert got.shape == np.shape(ref), (got.shape, np.shape(ref))
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(ref, np.float64),
                               rtol=tol, atol=tol)


RED = {"SUM": lambda a: np.sum(a, 0), "PRODUCT": lambda a: np.prod(a, 0),
       "MIN": lambda a: np.min(a, 0), "MAX": lambda a: np.max(a, 0),
       "AVG": lambda a: np.mean(a, 0), "BAND": lambda a: np.bitwise_and.reduce(a, 0),
       "BOR": lambda a: np.bitwise_or.reduce(a, 0), "BXOR": lambda a: np.bitwise_xor.reduce(a, 0)}


def bf16(a):
    return T(a, "bfloat16").float().numpy()


@check
def all_reduce_ops():
    for dtype, ops in [("float32", ["SUM", "AVG", "PRODUCT", "MIN", "MAX"]),
                       ("float64", ["SUM", "AVG"]),
                       ("int64", ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]),
                       ("int32", ["SUM", "BXOR"]), ("uint8", ["MAX", "BOR"])]:
        for op in ops:
            ins = [data(r, (3, 5), dtype, salt=1) for r in range(N)]
            t = T(ins[R])
            dist.all_reduce(t, getattr(dist.ReduceOp, op))
            close(t, RED[op](np.stack(ins)))
            assert t.dtype == getattr(ember, dtype), (op, t.dtype)


@check
def all_reduce_bfloat16_and_bool():
    ins = [bf16(data(r, (7,), salt=2)) for r in range(N)]
    t = T(ins[R], "bfloat16")
    dist.all_reduce(t)
    close(t, bf16(np.sum(ins, 0)), tol=1e-2)
    assert t.dtype == ember.bfloat16
    b = [data(r, (9,), "bool", salt=3) for r in range(N)]
    t = T(b[R])
    dist.all_reduce(t, dist.ReduceOp.SUM)
    assert t.dtype == ember.bool and (t.numpy() == np.any(b, 0)).all()
    t = T(b[R])
    dist.all_reduce(t, dist.ReduceOp.MIN)
    assert (t.numpy() == np.all(b, 0)).all()


@check
def all_reduce_float_bitwise_raises():
    try:
        dist.all_reduce(ember.ones(2), dist.ReduceOp.BAND)
    except RuntimeError as e:
        assert "BAND" in str(e) and "float32" in str(e), e
    else:
        raise AssertionError("no error")


@check
def all_reduce_noncontiguous_view():
    ins = [data(r, (4, 3), salt=4) for r in range(N)]
    base = T(ins[R].T.copy())
    v = base.t()  # a view: (4, 3) non-contiguous
    dist.all_reduce(v)
    close(v, np.sum(ins, 0))
    close(base, np.sum(ins, 0).T)


@check
def all_reduce_async_future():
    ins = [data(r, (5,), salt=5) for r in range(N)]
    t = T(ins[R])
    w = dist.all_reduce(t, async_op=True)
    fut = w.get_future()
    res = fut.wait()
    assert w.is_completed() and fut.done()
    assert res[0] is t
    close(t, np.sum(ins, 0))


@check
def broadcast_src1():
    for dtype in ["float32", "bfloat16", "int64"]:
        ins = [data(r, (2, 3), "float32" if dtype == "bfloat16" else dtype, 6) for r in range(N)]
        t = T(ins[R], dtype if dtype == "bfloat16" else None)
        dist.broadcast(t, src=N - 1)
        ref = bf16(ins[N - 1]) if dtype == "bfloat16" else ins[N - 1]
        close(t, ref)


@check
def reduce_to_last():
    for op in ["SUM", "MAX", "AVG"]:
        ins = [data(r, (6,), salt=7) for r in range(N)]
        t = T(ins[R])
        dist.reduce(t, dst=N - 1, op=getattr(dist.ReduceOp, op))
        close(t, RED[op](np.stack(ins)) if R == N - 1 else ins[R])


@check
def all_gather_uneven():
    ins = [data(r, (r + 1, 2), salt=8) for r in range(N)]
    outs = [ember.zeros(r + 1, 2) for r in range(N)]
    dist.all_gather(outs, T(ins[R]))
    for o, ref in zip(outs, ins):
        close(o, ref)


@check
def all_gather_into_tensor_cat_and_stack():
    ins = [data(r, (2, 3), salt=9) for r in range(N)]
    out = ember.zeros(2 * N, 3)
    dist.all_gather_into_tensor(out, T(ins[R]))
    close(out, np.concatenate(ins))
    out = ember.zeros(N, 2, 3, dtype=ember.bfloat16)
    dist.all_gather_into_tensor(out, T(ins[R], "bfloat16"))
    close(out, bf16(np.stack(ins)))


@check
def reduce_scatter_list_and_tensor():
    ins = [[data(r, (3,), salt=10 + i) for i in range(N)] for r in range(N)]
    out = ember.zeros(3)
    dist.reduce_scatter(out, [T(a) for a in ins[R]])
    close(out, np.sum([ins[r][R] for r in range(N)], 0))
    flat = [data(r, (2 * N, 2), salt=20) for r in range(N)]
    out = ember.zeros(2, 2)
    dist.reduce_scatter_tensor(out, T(flat[R]), op=dist.ReduceOp.MAX)
    close(out, np.max([f[2 * R:2 * R + 2] for f in flat], 0))


@check
def all_to_all_lists():
    ins = [[data(r, (i + 1,), salt=30 + i) for i in range(N)] for r in range(N)]
    outs = [ember.zeros(R + 1) for _ in range(N)]
    dist.all_to_all(outs, [T(a) for a in ins[R]])
    for src in range(N):
        close(outs[src], ins[src][R])


@check
def all_to_all_single_even_and_uneven():
    ins = [data(r, (2 * N, 3), salt=40) for r in range(N)]
    out = ember.zeros(2 * N, 3)
    dist.all_to_all_single(out, T(ins[R]))
    close(out, np.concatenate([ins[s][2 * R:2 * R + 2] for s in range(N)]))
    # rank r sends (i + r + 1) rows to rank i
    split = {r: [i + r + 1 for i in range(N)] for r in range(N)}
    ins = [data(r, (sum(split[r]), 2), salt=41) for r in range(N)]
    osz = [split[s][R] for s in range(N)]
    out = ember.zeros(sum(osz), 2)
    dist.all_to_all_single(out, T(ins[R]), osz, split[R])
    ref = []
    for s in range(N):
        off = sum(split[s][:R])
        ref.append(ins[s][off:off + split[s][R]])
    close(out, np.concatenate(ref))


@check
def gather_and_scatter():
    ins = [data(r, (2, 2), "int64", salt=50) for r in range(N)]
    dst = N - 1
    outs = [ember.zeros(2, 2, dtype=ember.int64) for _ in range(N)] if R == dst else None
    dist.gather(T(ins[R]), outs, dst=dst)
    if R == dst:
        for o, ref in zip(outs, ins):
            close(o, ref)
    pieces = [data(0, (3,), salt=60 + i) for i in range(N)]
    t = ember.zeros(3)
    dist.scatter(t, [T(p) for p in pieces] if R == 0 else None, src=0)
    close(t, pieces[R])


@check
def point_to_point():
    nxt, prv = (R + 1) % N, (R - 1) % N
    mine = data(R, (4,), salt=70)
    got = ember.zeros(4)
    if R % 2 == 0:
        dist.send(T(mine), nxt)
        src = dist.recv(got, prv)
    else:
        src = dist.recv(got, prv)
        dist.send(T(mine), nxt)
    assert src == prv, src
    close(got, data(prv, (4,), salt=70))
    got = ember.zeros(4)
    ws = [dist.isend(T(mine), nxt, tag=3), dist.irecv(got, prv, tag=3)]
    for w in ws:
        w.wait()
    close(got, data(prv, (4,), salt=70))
    got = ember.zeros(4, dtype=ember.bfloat16)
    ops = [dist.P2POp(dist.irecv, got, prv), dist.P2POp(dist.isend, T(mine, "bfloat16"), nxt)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    close(got, bf16(data(prv, (4,), salt=70)))


@check
def barrier_sync_and_async():
    dist.barrier()
    w = dist.barrier(async_op=True)
    assert w.wait() is True and w.is_completed()
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))


@check
def object_collectives():
    objs = [None] * N
    dist.all_gather_object(objs, {"rank": R, "s": "x" * R, "t": (1.5, None)})
    assert objs == [{"rank": r, "s": "x" * r, "t": (1.5, None)} for r in range(N)], objs
    lst = [1, "a", {"k": [1, 2]}] if R == 0 else [None] * 3
    dist.broadcast_object_list(lst, src=0)
    assert lst == [1, "a", {"k": [1, 2]}], lst
    g = [None] * N if R == 0 else None
    dist.gather_object(("g", R), g, dst=0)
    if R == 0:
        assert g == [("g", r) for r in range(N)], g
    out = [None]
    dist.scatter_object_list(out, [f"piece{i}" * (i + 1) for i in range(N)] if R == 0 else None,
                             src=0)
    assert out[0] == f"piece{R}" * (R + 1), out
    objs = [None] * N
    dist.all_gather_object(objs, ember.arange(3) + R)
    assert [o.tolist() for o in objs] == [[r, r + 1, r + 2] for r in range(N)]
    if R == 0:
        dist.send_object_list([{"a": 1}, [2, 3]], dst=1)
    elif R == 1:
        got = [None, None]
        assert dist.recv_object_list(got, src=0) == 0 and got == [{"a": 1}, [2, 3]], got


class Custom:
    pass


@check
def object_unpickling_refuses_code():
    objs = [None] * N
    try:
        dist.all_gather_object(objs, Custom())
    except Exception as e:
        assert "refusing to unpickle" in str(e), e
    else:
        raise AssertionError("a class instance was unpickled without opting in")
    dist.allow_unsafe_object_unpickling(True)
    try:
        dist.all_gather_object(objs, Custom())
        assert all(type(o).__name__ == "Custom" for o in objs)
    finally:
        dist.allow_unsafe_object_unpickling(False)


@check
def subgroups():
    g = dist.new_group([N - 1])
    if R == N - 1:
        assert dist.get_rank(g) == 0 and dist.get_world_size(g) == 1
        t = ember.ones(2)
        dist.all_reduce(t, group=g)
        close(t, np.ones(2))
    else:
        assert g is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(g) == -1
    full = dist.new_group(list(range(N)))
    t = ember.full((2,), float(R + 1))
    dist.all_reduce(t, group=full)
    close(t, np.full(2, N * (N + 1) / 2))
    assert dist.get_process_group_ranks(full) == list(range(N))
    t = ember.full((1,), float(R))
    dist.broadcast(t, group=full, group_src=N - 1)
    close(t, [N - 1.0])
    mine, groups = dist.new_subgroups(1)
    assert dist.get_world_size(mine) == 1 and dist.get_process_group_ranks(mine) == [R]
    assert len(groups) == N and groups[R] is mine


@check
def timeouts_raise():
    """recv with no sender and a barrier that rank 0 enters alone raise DistBackendError; the
    same Works complete once the peer catches up."""
    g = dist.new_group(list(range(N)), timeout=datetime.timedelta(seconds=ALONE_SMALL))
    late = []
    if R == 0:
        got = ember.zeros(1)
        for w in (dist.irecv(got, 1, group=g), dist.barrier(g, async_op=True)):
            try:
                w.wait()
            except dist.DistBackendError as e:
                assert f"timed out after {ALONE_SMALL:.1f} s on rank 0" in str(e), e
            else:
                raise AssertionError("no timeout")
            late.append(w)
    dist.barrier()
    if R == 1:
        dist.send(ember.full((1,), 7.0), 0, group=g)
    if R != 0:
        dist.barrier(g)
    for w in late:
        assert w.wait(LATE) is True
    if R == 0:
        close(got, [7.0])


@check
def large_messages_on_the_comm_thread():
    """Collectives at and above EMBER_MPI_BLOCKING_BYTES (blocking MPI on the communication
    thread) mixed with small ones issued while it is busy (queued behind it, nonblocking), in
    flight together: every result equals the reference; a large all_reduce (in pieces, the
    last one shorter) that rank 0 enters alone raises within the timeout and completes once the
    peers join. The thresholds are lowered here (alike on every rank) to keep the test small."""
    engines = [dist.GroupMember.WORLD.engine("cpu", "test")]
    saved = (engines[0].blocking_bytes, engines[0].piece_bytes)

    def lower(e):
        e.blocking_bytes = min(e.blocking_bytes, 1 << 20)
        e.piece_bytes = min(e.piece_bytes, 300_000)
    lower(engines[0])
    big = [data(r, (1 << 18,), salt=40) for r in range(N)]  # 1 MiB of float32
    small = [data(r, (5,), salt=41) for r in range(N)]
    x, y, z = T(big[R]), T(small[R]), T(big[R][: 1 << 17].astype(np.float64))
    works = [dist.all_reduce(x, async_op=True), dist.all_reduce(y, dist.ReduceOp.MAX,
                                                                async_op=True),
             dist.all_reduce(z, dist.ReduceOp.AVG, async_op=True)]
    for w in reversed(works):
        assert w.wait() is True
    close(x, RED["SUM"](np.stack(big)), 1e-4)
    close(y, RED["MAX"](np.stack(small)))
    close(z, RED["AVG"](np.stack([b[: 1 << 17].astype(np.float64) for b in big])))
    outs = [ember.zeros(1 << 18) for _ in range(N)]
    dist.all_gather(outs, T(big[R]))
    for r in range(N):
        close(outs[r], big[r])
    b = T(big[R])
    dist.broadcast(b, src=N - 1)
    close(b, big[N - 1])
    g = dist.new_group(list(range(N)), timeout=datetime.timedelta(seconds=ALONE))
    ge = g.engine("cpu", "test")
    # 300 kB pieces whatever EMBER_MPI_PIECE_BYTES says (4 kB in the comm-thread run): the peers'
    # whole all_reduce must fit in the timeout on a loaded CI machine
    ge.blocking_bytes, ge.piece_bytes = min(ge.blocking_bytes, 1 << 20), 300_000
    t = T(big[R])
    if R == 0:
        w = dist.all_reduce(t, group=g, async_op=True)
        try:
            w.wait()
        except dist.DistBackendError as e:
            assert f"all_reduce: timed out after {ALONE:.1f} s on rank 0" in str(e), e
        else:
            raise AssertionError("no timeout")
    dist.barrier()
    if R != 0:
        w = dist.all_reduce(t, group=g, async_op=True)
    assert w.wait(LATE if R == 0 else None) is True
    close(t, RED["SUM"](np.stack(big)), 1e-4)
    engines[0].blocking_bytes, engines[0].piece_bytes = saved


@check
def large_collectives_in_pieces():
    """all_gather (uneven), reduce_scatter (uneven parts; bfloat16 AVG, reduced in float32) and
    broadcast at and above the communication-thread threshold go as nonblocking pieces of about
    piece_bytes one after another (counted here), and equal the single-process reference."""
    import ember.distributed._engine_mpi as engine_mpi
    e = dist.GroupMember.WORLD.engine("cpu", "test")
    saved = (e.blocking_bytes, e.piece_bytes)
    e.blocking_bytes, e.piece_bytes = 1 << 20, 300_000  # (whatever the run says: few pieces)
    real, count = engine_mpi._progress, [0]

    def counting(req):
        count[0] += 1
        real(req)
    engine_mpi._progress = counting
    try:
        rows = [100_000 * (r + 1) for r in range(N)]  # float32: 0.4 MB per row unit
        ins = [data(r, (rows[r],), salt=50) for r in range(N)]
        outs = [ember.zeros(n) for n in rows]
        dist.all_gather(outs, T(ins[R]))
        for o, ref in zip(outs, ins):
            close(o, ref)
        pieces = -(-rows[-1] * 4 // (e.piece_bytes // N))
        assert count[0] == pieces, (count[0], pieces)
        parts = [[data(r, (rows[i],), salt=60 + i) for i in range(N)] for r in range(N)]
        out = ember.zeros(rows[R])
        dist.reduce_scatter(out, [T(a) for a in parts[R]])
        close(out, np.sum([parts[r][R] for r in range(N)], 0), 1e-4)
        assert count[0] > 2 * pieces - 1, count[0]
        flat = [data(r, (N << 17,), "bfloat16", salt=70) for r in range(N)]
        out = ember.zeros(1 << 17, dtype=ember.bfloat16)
        dist.reduce_scatter_tensor(out, T(flat[R], "bfloat16"), op=dist.ReduceOp.AVG)
        ref = np.mean([bf16(f)[R << 17:(R + 1) << 17] for f in flat], 0)
        close(out, ref, 1e-2)
        before = count[0]
        b = T(data(R, (299_999,), salt=80))  # 1.2 MB: 4 pieces, the last one shorter
        dist.broadcast(b, src=N - 1)
        close(b, data(N - 1, (299_999,), salt=80))
        assert count[0] - before == 4, count[0] - before
    finally:
        engine_mpi._progress = real
        e.blocking_bytes, e.piece_bytes = saved


dist.barrier()
dist.destroy_process_group()
assert not dist.is_initialized()
finish(R)  # (the group is gone: finish only reports)
