"""Worker (mpiexec, 4 ranks): DeviceMesh (2-D, named dims, slicing, groups per dim) and the
functional collectives, against numpy."""
import datetime
import time

import numpy as np
from worker_check import check as _check
from worker_check import finish

import ember
import ember.distributed as dist
import ember.distributed._functional_collectives as funcol
from ember.distributed.device_mesh import init_device_mesh
from ember.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from ember.distributed.tensor._placements import shard_sizes

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))  # (no hang: raise)
R, N = dist.get_rank(), dist.get_world_size()


check = _check(R)


MESH = np.arange(N).reshape(2, N // 2)
mesh = init_device_mesh("cpu", (2, N // 2), mesh_dim_names=("dp", "tp"))


@check
def mesh_layout_and_slices():
    i, j = np.argwhere(MESH == R)[0]
    assert mesh.shape == (2, N // 2) and mesh.ndim == 2 and mesh.size() == N
    assert mesh.get_coordinate() == [i, j]
    assert mesh.get_local_rank("dp") == i and mesh.get_local_rank(1) == j
    assert dist.get_process_group_ranks(mesh.get_group("dp")) == MESH[:, j].tolist()
    assert dist.get_process_group_ranks(mesh.get_group("tp")) == MESH[i, :].tolist()
    tp = mesh["tp"]
    assert tp.ndim == 1 and tp.mesh.tolist() == MESH[i, :].tolist()
    assert tp.get_group() is mesh.get_group("tp")
    assert mesh["dp", "tp"].shape == mesh.shape
    try:
        mesh["pp"]
    except KeyError as e:
        assert "pp" in str(e)
    else:
        raise AssertionError("no KeyError")


@check
def collectives_on_mesh_dims():
    i, j = np.argwhere(MESH == R)[0]
    t = ember.full((2,), float(R))
    dist.all_reduce(t, group=mesh.get_group("dp"))
    assert t.tolist() == [float(MESH[:, j].sum())] * 2, t
    t = ember.full((1,), float(R))
    dist.all_reduce(t, group=mesh.get_group("tp"), op=dist.ReduceOp.MAX)
    assert t.tolist() == [float(MESH[i, :].max())]


@check
def functional_collectives():
    i, j = np.argwhere(MESH == R)[0]
    x = ember.full((2, 3), float(R))
    y = funcol.all_reduce(x, "sum", (mesh, "dp"))
    assert x.tolist() == [[float(R)] * 3] * 2  # input untouched
    assert y.tolist() == [[float(MESH[:, j].sum())] * 3] * 2
    g = funcol.all_gather_tensor(x, 1, (mesh, 0))
    ref = np.concatenate([np.full((2, 3), float(r)) for r in MESH[:, j]], axis=1)
    np.testing.assert_array_equal(g.numpy(), ref)
    a = ember.arange(8.0).reshape(2, 4) * (R + 1)
    s = funcol.reduce_scatter_tensor(a, "sum", 1, (mesh, "dp"))
    full = sum(np.arange(8.0).reshape(2, 4) * (r + 1) for r in MESH[:, j])
    np.testing.assert_allclose(s.numpy(), np.split(full, 2, axis=1)[i])
    b = funcol.broadcast(x, int(MESH[0, j]), mesh.get_group("dp"))
    assert b.tolist() == [[float(MESH[0, j])] * 3] * 2
    w = funcol.wait_tensor(funcol.all_reduce(ember.ones(1), "avg", list(range(N))))
    assert w.tolist() == [1.0]


@check
def functional_collectives_async():
    """As PyTorch's: a functional collective returns at once an AsyncCollectiveTensor that waits
    on first use. Rank 0 starts an all_reduce before the others call it (it returns: it does not
    wait for them), then meets them in a world barrier; every use gives the reduced values, and
    ops on it give plain tensors (if the call waited, rank 0 would time out)."""
    from ember.distributed._async_tensor import AsyncCollectiveTensor, pending
    world = dist.new_group(list(range(N)))  # (not the world group: the barrier must not match it)
    x = ember.full((2, 3), float(R + 1))
    total = float(sum(range(1, N + 1)))
    if R == 0:
        y = funcol.all_reduce(x, "sum", world)
        assert isinstance(y, AsyncCollectiveTensor) and pending() == 1, (type(y), pending())
    dist.barrier()
    if R != 0:
        y = funcol.all_reduce(x, "sum", world)
    z = y * 2  # a use: waits, and gives a plain tensor
    assert type(z) is ember.Tensor and z.tolist() == [[2 * total] * 3] * 2, z
    assert pending() == 0 and y.tolist() == [[total] * 3] * 2
    w = funcol.wait_tensor(funcol.all_gather_tensor(x, 0, world))
    assert type(w) is ember.Tensor, type(w)
    np.testing.assert_array_equal(w.numpy(), np.repeat(np.arange(1.0, N + 1), 2)[:, None]
                                  * np.ones((1, 3)))
    # reads of the data wait too: numpy(), printing, an op's list argument
    s = funcol.reduce_scatter_tensor(ember.ones(N, 2), "sum", 0, world)
    np.testing.assert_array_equal(s.numpy(), np.full((1, 2), float(N)))
    b = funcol.broadcast(x, 0, world)
    assert "AsyncCollectiveTensor" in repr(b) and b.tolist() == [[1.0] * 3] * 2
    c = ember.cat([funcol.all_reduce(x, "max", world), x])
    assert c[:2].tolist() == [[float(N)] * 3] * 2 and pending() == 0
    # results dropped unused: finished and forgotten once done (the registry does not grow)
    for _ in range(3):
        funcol.all_reduce(x, "sum", world)
    dist.barrier(world)
    deadline = time.monotonic() + 30
    while pending() and time.monotonic() < deadline:  # (each look polls them)
        time.sleep(0.01)
    assert pending() == 0, pending()


@check
def functional_collectives_autograd():
    """all_gather_tensor_autograd / reduce_scatter_tensor_autograd / all_to_all_single_autograd
    on the 4 ranks: forward values and input gradients against numpy over every rank's data
    (rank k's loss weighs the output with W(k); the input gradient is the transposed
    collective of those weights)."""
    world = list(range(N))

    def W(k, rows):
        return np.arange(rows * 3, dtype=np.float32).reshape(rows, 3) * (k + 1) - k

    def X(k, rows):
        return np.full((rows, 3), k + 0.5, np.float32)
    x = ember.tensor(X(R, 2), requires_grad=True)
    y = funcol.all_gather_tensor_autograd(x, 0, world)
    np.testing.assert_array_equal(y.detach().numpy(), np.concatenate([X(k, 2) for k in world]))
    (y * ember.tensor(W(R, 2 * N))).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), sum(W(k, 2 * N)[2 * R:2 * R + 2] for k in world))
    x = ember.tensor(X(R, 2 * N) * np.arange(1, 2 * N + 1, dtype=np.float32)[:, None],
                     requires_grad=True)
    out = funcol.reduce_scatter_tensor_autograd(x, "sum", 0, world)
    ref = sum(X(k, 2 * N) * np.arange(1, 2 * N + 1)[:, None] for k in world)[2 * R:2 * R + 2]
    np.testing.assert_allclose(out.detach().numpy(), ref)
    (out * ember.tensor(W(R, 2))).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.concatenate([W(k, 2) for k in world]))
    # uneven splits: rank k sends k + 1 rows to every rank
    x = ember.tensor(X(R, (R + 1) * N), requires_grad=True)
    out = funcol.all_to_all_single_autograd(x, [k + 1 for k in world], [R + 1] * N, world)
    np.testing.assert_array_equal(out.detach().numpy(),
                                  np.concatenate([X(k, k + 1) for k in world]))
    rows = sum(k + 1 for k in world)
    (out * ember.tensor(W(R, rows))).sum().backward()
    # rank k's weights for the rows it got from this rank, in rank order
    want = np.concatenate([W(k, rows)[sum(range(1, R + 1)):sum(range(1, R + 2))] for k in world])
    np.testing.assert_allclose(x.grad.numpy(), want)
    try:
        funcol.reduce_scatter_tensor_autograd(x, "max", 0, world)
    except RuntimeError as e:
        assert "only the 'sum' reduction" in str(e), e
    else:
        raise AssertionError("max accepted")


@check
def functional_collectives_in_compile():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    def f(x):
        y = funcol.all_reduce(x * 2, "sum", (mesh, "dp"))
        z = funcol.all_gather_tensor(y + 1, 0, (mesh, "tp"))
        w = funcol.reduce_scatter_tensor(z, dist.ReduceOp.SUM, 0, mesh["tp"])
        return funcol.wait_tensor(w).sin()
    x = ember.full((2, 3), float(R + 1))
    eager = f(x)
    got = ember.compile(f, backend=backend)(x)
    np.testing.assert_allclose(got.numpy(), eager.numpy(), rtol=1e-6)
    assert len(graphs) == 1, len(graphs)  # one graph: no break at the collectives
    names = [str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"]
    # three collectives, each result used only through a wait_tensor (the capture waits right
    # after each, as PyTorch's tracing does), and the explicit wait_tensor of w
    colls = [n for n in graphs[0].graph.nodes if n.op == "call_function"
             and "_c10d_functional" in str(n.target) and "wait_tensor" not in str(n.target)]
    assert len(colls) == 3, names
    assert sum("wait_tensor" in t for t in names) == 4, names
    for n in colls:
        assert [str(u.target) for u in n.users] == [str(n.users and next(iter(n.users)).target)]
        assert "wait_tensor" in str(next(iter(n.users)).target), (n, list(n.users))
    i, j = np.argwhere(MESH == R)[0]
    # y: 2x summed over the dp column; z: the tp row's y + 1 stacked; w: z summed over the tp
    # row (tp equal copies), this rank's block
    tp = MESH.shape[1]
    want = np.sin(tp * (2.0 * (MESH[:, j] + 1).sum() + 1)) * np.ones((2, 3))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)


X = np.arange(5 * 6, dtype=np.float32).reshape(5, 6)  # 5 rows: uneven shards


def expected_local(placements):
    """This rank's piece of X under placements, computed with numpy (torch.chunk sizes)."""
    a = X
    coord = mesh.get_coordinate()
    for m, p in enumerate(placements):
        if isinstance(p, Shard):
            sizes = shard_sizes(a.shape[p.dim], mesh.size(m))
            start = sum(sizes[:coord[m]])
            a = np.take(a, range(start, start + sizes[coord[m]]), axis=p.dim)
    return a


PLACEMENTS = [(Shard(0), Shard(1)), (Shard(0), Shard(0)), (Replicate(), Shard(1)),
              (Shard(1), Replicate()), (Replicate(), Replicate()), (Shard(-1), Shard(0))]


@check
def dtensor_distribute_and_full_tensor():
    for ps in PLACEMENTS:
        d = distribute_tensor(ember.tensor(X) if R == 0 else ember.zeros(5, 6), mesh, ps)
        np.testing.assert_array_equal(d.to_local().numpy(), expected_local(d.placements))
        assert tuple(d.shape) == (5, 6)
        np.testing.assert_array_equal(d.full_tensor().numpy(), X)


@check
def dtensor_redistribute_all_pairs():
    for a in PLACEMENTS:
        d = distribute_tensor(ember.tensor(X), mesh, a)
        for b in PLACEMENTS:
            e = d.redistribute(mesh, b)
            np.testing.assert_array_equal(e.to_local().numpy(), expected_local(e.placements),
                                          err_msg=f"{a} -> {b}")
            np.testing.assert_array_equal(e.full_tensor().numpy(), X)


@check
def dtensor_partial():
    i, j = mesh.get_coordinate()
    local = ember.tensor(X) * float(R + 1)
    d = DTensor.from_local(local, mesh, [Partial(), Replicate()])
    total = X * float(sum(MESH[:, j] + 1))
    np.testing.assert_allclose(d.full_tensor().numpy(), total)
    s = d.redistribute(mesh, [Shard(0), Replicate()])
    np.testing.assert_allclose(s.to_local().numpy(),
                               np.take(total, range(*((0, 3) if i == 0 else (3, 5))), axis=0))
    p = distribute_tensor(ember.tensor(X), mesh, [Replicate(), Partial()])
    assert (p.to_local().numpy() == (X if j == 0 else 0)).all()
    np.testing.assert_array_equal(p.full_tensor().numpy(), X)
    m = DTensor.from_local(ember.full((2,), float(R)), mesh, [Partial("max"), Partial("max")])
    assert m.full_tensor().tolist() == [float(N - 1)] * 2


finish(R)
