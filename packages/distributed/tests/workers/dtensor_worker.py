"""Worker (mpiexec, 2 or 3 ranks): ops on DTensors (sharding propagation) and autograd through
them, each against the same computation on whole tensors in one process."""
import sys

import numpy as np
from worker_check import check, finish

import ember
import ember.distributed as dist
from ember.distributed.tensor import (
    DTensor,
    Partial,
    Replicate,
    Shard,
    distribute_module,
    distribute_tensor,
    init_device_mesh,
)

dist.init_process_group("gloo")
R, N = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (N,))
ember.manual_seed(0)  # the same data on every rank
A, B, C = ember.randn(5, 4), ember.randn(4, 3), ember.randn(5, 4)  # 5 rows: uneven shards


def close(d, ref, tol=1e-5):
    assert isinstance(d, DTensor), type(d)
    np.testing.assert_allclose(d.full_tensor().detach().numpy(), ref.detach().numpy(),
                               rtol=tol, atol=tol)


def dt(t, *ps):
    return distribute_tensor(t, mesh, list(ps))


@check(R)
def matmul_placements():
    for pa, pb, want in [(Shard(0), Replicate(), Shard(0)), (Replicate(), Shard(1), Shard(1)),
                         (Shard(1), Shard(0), Partial()), (Replicate(), Replicate(),
                                                           Replicate())]:
        c = dt(A, pa) @ dt(B, pb)
        assert c.placements == (want,), (pa, pb, c.placements)
        close(c, A @ B)
    close(ember.mm(dt(A, Shard(1)), dt(B, Replicate())), A @ B)
    close(ember.addmm(dt(ember.ones(3), Replicate()), dt(A, Shard(0)), dt(B, Replicate())),
          ember.addmm(ember.ones(3), A, B))
    x3 = ember.randn(3, 5, 4)
    close(ember.matmul(dt(x3, Shard(0)), dt(B, Replicate())), x3 @ B)
    close(ember.nn.functional.linear(dt(A, Shard(0)), dt(B.t(), Shard(0)), dt(ember.ones(3),
                                                                            Shard(0))),
          ember.nn.functional.linear(A, B.t(), ember.ones(3)))


@check(R)
def pointwise_and_partial():
    a, c = dt(A, Shard(0)), dt(C, Replicate())
    y = (a * c + 2).exp() - c
    assert y.placements == (Shard(0),)
    close(y, (A * C + 2).exp() - C)
    p = dt(A, Shard(1)) @ dt(B, Shard(0))           # Partial
    q = p + p * 3.0                                 # stays Partial: linear
    assert q.placements == (Partial(),), q.placements
    close(q, (A @ B) * 4)
    r = ember.relu(p)                               # not linear: reduced first
    assert r.placements == (Replicate(),)
    close(r, ember.relu(A @ B))
    v = ember.randn(4)
    close(dt(v, Replicate()) + dt(A, Shard(0)), v + A)   # broadcast
    close(dt(A, Shard(0)) * ember.tensor(2.0), A * 2)    # a 0-d plain tensor: Replicate


@check(R)
def reductions():
    a = dt(A, Shard(0))
    s = a.sum(0)
    assert s.placements == (Partial(),)
    close(s, A.sum(0))
    s1 = a.sum(1)
    assert s1.placements == (Shard(0),)
    close(s1, A.sum(1))
    close(a.mean(0), A.mean(0))
    close(a.mean(), A.mean())
    close(a.amax(0), A.amax(0))
    close(dt(A, Shard(1)).sum(1, keepdim=True), A.sum(1, keepdim=True))
    close(a.var(0), A.var(0))


@check(R)
def views():
    x = ember.randn(6, 4, 2)
    d = dt(x, Shard(0))
    close(d.transpose(0, 1), x.transpose(0, 1))
    assert d.transpose(0, 1).placements == (Shard(1),)
    close(d.permute(2, 0, 1), x.permute(2, 0, 1))
    close(d.view(6, 8), x.view(6, 8))
    assert d.view(6, 8).placements == (Shard(0),)
    close(d.reshape(48), x.reshape(48))     # merges the sharded dim: even only
    close(dt(x, Shard(1)).reshape(6, 2, 2, 2), x.reshape(6, 2, 2, 2))
    close(d.unsqueeze(0).squeeze(0), x)
    close(d[:, 1], x[:, 1])
    close(d[2], x[2])
    close(dt(x, Shard(2)).flatten(1), x.flatten(1))
    e = dt(ember.randn(6, 1), Shard(0)).expand(6, 5)
    assert e.placements == (Shard(0),)
    close(e * 1, e.full_tensor())
    close(ember.cat([d, d * 2], 1), ember.cat([x, x * 2], 1))
    parts = d.chunk(2, dim=2)
    close(parts[1], x.chunk(2, dim=2)[1])


@check(R)
def nn_ops():
    x = ember.randn(5, 6)
    d = dt(x, Shard(0))
    w, b = ember.randn(6), ember.randn(6)
    ln = ember.nn.functional.layer_norm(d, (6,), dt(w, Replicate()), dt(b, Replicate()))
    assert ln.placements == (Shard(0),)
    close(ln, ember.nn.functional.layer_norm(x, (6,), w, b))
    assert d.softmax(-1).placements == (Shard(0),)
    close(d.softmax(-1), x.softmax(-1))
    close(d.log_softmax(0), x.log_softmax(0))
    emb = ember.randn(10, 4)
    idx = ember.tensor([[1, 2, 9], [0, 3, 3]])
    e = ember.nn.functional.embedding(dt(idx, Shard(0)), dt(emb, Replicate()))
    assert e.placements == (Shard(0),)
    close(e, ember.nn.functional.embedding(idx, emb))
    e2 = ember.nn.functional.embedding(dt(idx, Replicate()), dt(emb, Shard(1)))
    assert e2.placements == (Shard(2),)
    close(e2, ember.nn.functional.embedding(idx, emb))


def grads_match(fn, inputs, placements):
    """fn on whole tensors vs on DTensors: loss and every input's grad (as a full tensor)."""
    refs = [t.clone().requires_grad_() for t in inputs]
    fn(*refs).backward()
    ds = [distribute_tensor(t, mesh, [p]).requires_grad_() for t, p in zip(inputs, placements)]
    out = fn(*ds)
    out.backward()
    for r, d in zip(refs, ds):
        assert isinstance(d.grad, DTensor), type(d.grad)
        close(d.grad, r.grad)


@check(R)
def autograd_through_ops():
    F = ember.nn.functional
    grads_match(lambda a, b: ember.relu(a @ b).sum(), [A, B], [Shard(0), Replicate()])
    grads_match(lambda a, b: (a @ b).tanh().mean(), [A, B], [Shard(1), Shard(0)])
    grads_match(lambda a, b: (a @ b).square().sum(), [A, B], [Replicate(), Shard(1)])
    w, b = ember.randn(4), ember.randn(4)
    grads_match(lambda x, w, b: F.layer_norm(x, (4,), w, b).square().sum(), [A, w, b],
                [Shard(0), Replicate(), Replicate()])
    grads_match(lambda x: x.softmax(-1).square().sum(), [A], [Shard(0)])
    emb = ember.randn(10, 4)
    idx = dt(ember.tensor([1, 2, 9, 3, 1]), Shard(0))
    ref = emb.clone().requires_grad_()
    F.embedding(ember.tensor([1, 2, 9, 3, 1]), ref).square().sum().backward()
    de = dt(emb, Replicate()).requires_grad_()
    F.embedding(idx, de).square().sum().backward()
    close(de.grad, ref.grad)
    x = ember.randn(6, 4, 2)
    grads_match(lambda x: x.transpose(0, 1).reshape(4, 12).sum(0).square().sum(), [x],
                [Shard(0)])


@check(R)
def differentiable_movement():
    ref = A.clone().requires_grad_()
    (ref * ref).sum().backward()
    d = dt(A, Shard(0)).requires_grad_()
    full = d.redistribute(mesh, [Replicate()]).to_local()
    (full * full).sum().backward()
    assert d.grad.placements == (Shard(0),)
    close(d.grad, ref.grad)
    local = dt(A, Shard(0)).to_local().detach().requires_grad_()
    y = DTensor.from_local(local, mesh, [Shard(0)], shape=A.shape)
    (y * y).sum().full_tensor().backward()
    np.testing.assert_allclose(local.grad.numpy(), 2 * local.detach().numpy(), rtol=1e-6)


@check(R)
def errors_name_the_op():
    d = dt(A, Shard(0))
    try:
        d + A  # plain non-scalar tensor beside a DTensor
    except RuntimeError as e:
        assert "add" in str(e) and "DTensor" in str(e), e
    else:
        raise AssertionError("no error for a mixed Tensor/DTensor add")
    try:
        d.cumprod(0)  # no sharding rule, no decomposition
    except NotImplementedError as e:
        assert "cumprod" in str(e) and "Shard" in str(e), e
    else:
        raise AssertionError("cumprod on a DTensor ran")
    try:
        d.numpy()
    except NotImplementedError:
        pass
    else:
        raise AssertionError("numpy() of a DTensor")


@check(R)
def random_ops_match_one_process():
    ember.manual_seed(11)
    want = ember.nn.functional.dropout(ember.ones(5, 4), 0.5, True)
    ember.manual_seed(11)
    got = ember.nn.functional.dropout(dt(ember.ones(5, 4), Shard(0)), 0.5, True)
    assert got.placements == (Shard(0),)
    close(got, want)
    w = dt(ember.zeros(5, 3), Shard(1))
    ember.manual_seed(12)
    ember.nn.init.normal_(w)
    ember.manual_seed(12)
    close(w, ember.nn.init.normal_(ember.zeros(5, 3)))
    w.zero_()
    close(w, ember.zeros(5, 3))
    w.fill_(2.0)
    close(w, ember.full((5, 3), 2.0))


@check(R)
def inplace_and_parameters():
    d = dt(A, Shard(0))
    d.add_(dt(C, Replicate()))
    assert d.placements == (Shard(0),)
    close(d, A + C)
    p = ember.nn.Parameter(dt(A, Replicate()))
    assert isinstance(p, ember.nn.Parameter) and isinstance(p, DTensor) and p.requires_grad
    m = ember.nn.Linear(4, 3)
    m.weight = ember.nn.Parameter(dt(B.t().contiguous(), Shard(0)))
    assert any(q is m.weight for q in m.parameters())
    g = dt(A @ B, Shard(1)) @ dt(ember.randn(3, 2), Replicate())
    opt_p = ember.nn.Parameter(dt(A, Shard(0)))
    opt = ember.optim.SGD([opt_p], lr=0.5)
    (opt_p * 3).sum().backward()
    opt.step()
    close(opt_p.detach(), A - 1.5)
    assert g.shape == (5, 2)


@check(R)
def against_torch():
    import torch
    ta = torch.tensor(A.numpy(), requires_grad=True)
    tb = torch.tensor(B.numpy(), requires_grad=True)
    torch.nn.functional.layer_norm(torch.relu(ta @ tb), (3,)).square().sum().backward()
    x, w = dt(A, Shard(0)).requires_grad_(), dt(B, Shard(1)).requires_grad_()
    ember.nn.functional.layer_norm(ember.relu(x @ w), (3,)).square().sum().backward()
    np.testing.assert_allclose(x.grad.full_tensor().numpy(), ta.grad.numpy(), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(w.grad.full_tensor().numpy(), tb.grad.numpy(), rtol=1e-4,
                               atol=1e-5)


@check(R)
def distribute_module_with_partition():
    import copy
    nn = ember.nn
    ember.manual_seed(4)
    m = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    ref = copy.deepcopy(m)

    def part(name, mod, mesh):
        if name == "0":
            mod.register_parameter("weight", nn.Parameter(
                distribute_tensor(mod.weight.detach(), mesh, [Shard(0)])))

    dm = distribute_module(
        m, mesh, part,
        input_fn=lambda mod, inputs, mesh: tuple(dt(i, Replicate()) for i in inputs),
        output_fn=lambda mod, out, mesh: out.full_tensor())
    assert dm[0].weight.placements == (Shard(0),)
    assert dm[2].weight.placements == (Replicate(),) and isinstance(dm[0].bias, DTensor)
    x = ember.randn(3, 4)
    y = dm(x)
    assert not isinstance(y, DTensor)
    np.testing.assert_allclose(y.detach().numpy(), ref(x).detach().numpy(), rtol=1e-5)


finish(R)
sys.exit(0)
