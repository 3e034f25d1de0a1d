"""Worker (mpiexec, 2 or 4 ranks): FSDP2 prefetching. Training with forward/backward prefetch
(implicit and explicit) equals single-process training; the collectives are issued in the order
prefetching promises (a unit's next all-gather before the current one's compute, reduce-scatters
waited only at the end of backward), the same order on every rank."""
import numpy as np
from worker_check import check, finish

import ember
import ember.distributed as dist
import ember.nn as nn
from ember.distributed.fsdp import _param, fully_shard
from ember.distributed.tensor import init_device_mesh

dist.init_process_group("gloo")
R, N = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (N,))
B, L = 2 * N, 3


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(6, 6), nn.Tanh()) for _ in range(L))
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def make_model():
    ember.manual_seed(0)
    return Net()


def sharded(fwd=0, bwd=None, **kw):
    """fwd: how many layers ahead each layer's forward prefetches; bwd: same for backward
    (None: the default, one unit)."""
    model = make_model()
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, **kw)
    fully_shard(model, mesh=mesh, **kw)
    for i, layer in enumerate(model.layers):
        if fwd:
            layer.set_modules_to_forward_prefetch(list(model.layers[i + 1:i + 1 + fwd]))
        if bwd is not None:
            layer.set_modules_to_backward_prefetch(list(model.layers[max(0, i - bwd):i])[::-1])
    return model


def data(step):
    g = ember.Generator().manual_seed(50 + step)
    return ember.randn(B, 6, generator=g), ember.randn(B, 3, generator=g)


def mine(t):
    return t[2 * R:2 * R + 2]


def train(model, steps=3, unshard_first=False):
    """Losses (global) and the parameters gathered after `steps` AdamW steps."""
    opt = ember.optim.AdamW(model.parameters(), lr=0.02)
    losses = []
    for step in range(steps):
        x, y = data(step)
        if unshard_first:
            model.unshard()
        loss = nn.functional.mse_loss(model(mine(x)), mine(y))
        loss.backward()
        opt.step()
        opt.zero_grad()
        t = loss.detach().clone()
        dist.all_reduce(t)
        losses.append(t.item() / N)
    params = [p.full_tensor().detach().numpy() if hasattr(p, "full_tensor") else
              p.detach().numpy() for p in model.parameters()]
    return losses, params


def reference():
    model = make_model()
    opt = ember.optim.AdamW(model.parameters(), lr=0.02)
    losses = []
    for step in range(3):
        x, y = data(step)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, [p.detach().numpy() for p in model.parameters()]


REF = reference()


def assert_equal_ref(got):
    np.testing.assert_allclose(got[0], REF[0], rtol=1e-5, atol=1e-7)
    for a, b in zip(got[1], REF[1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def traced(model, backward=True):
    """One forward (+ backward) with events recorded as (event, name) pairs."""
    names = {model: "root", **{m: f"L{i}" for i, m in enumerate(model.layers)}}
    events = []
    _param.set_trace(events)
    try:
        x, y = data(0)
        loss = nn.functional.mse_loss(model(mine(x)), mine(y))
        if backward:
            loss.backward()
    finally:
        _param.set_trace(None)
    return [(e, names[m]) for e, m in events]


def first(ev, what):
    return ev.index(what)


def same_on_every_rank(ev):
    everyone = [None] * N
    dist.all_gather_object(everyone, ev)
    assert all(e == ev for e in everyone), everyone


@check(R)
def forward_prefetch_trains_like_single_process():
    assert_equal_ref(train(sharded(fwd=1)))
    assert_equal_ref(train(sharded(fwd=2, bwd=2)))


@check(R)
def no_prefetch_and_default_backward_prefetch_train_alike():
    assert_equal_ref(train(sharded()))
    assert_equal_ref(train(sharded(bwd=0), unshard_first=True))  # backward prefetch off
    assert_equal_ref(train(sharded(fwd=1, reshard_after_forward=False)))


@check(R)
def forward_all_gather_of_next_layer_issued_before_current_compute():
    ev = traced(sharded(fwd=1), backward=False)
    same_on_every_rank(ev)
    for i in range(L - 1):
        # L{i+1}'s all-gather goes out during L{i}'s pre-forward (before its compute), and is
        # not issued again when L{i+1} starts
        fi, fn = first(ev, ("forward", f"L{i}")), first(ev, ("forward", f"L{i + 1}"))
        ag = [k for k, e in enumerate(ev) if e == ("all_gather", f"L{i + 1}")]
        assert len(ag) == 1 and fi < ag[0] < fn, ev
        assert first(ev, ("all_gather_wait", f"L{i + 1}")) > fn, ev
    # without prefetch each layer issues its own all-gather when its forward starts
    ev = traced(sharded(), backward=False)
    for i in range(L):
        f = first(ev, ("forward", f"L{i}"))
        assert ev[f + 1:f + 3] == [("all_gather", f"L{i}"), ("all_gather_wait", f"L{i}")], ev


@check(R)
def backward_prefetches_in_reverse_order():
    for bwd in (None, 2):
        ev = traced(sharded(bwd=bwd))
        same_on_every_rank(ev)
        start = first(ev, ("forward", f"L{L - 1}"))
        gathers = [m for e, m in ev[start + 3:] if e == "all_gather"]
        assert gathers == ["root", "L2", "L1", "L0"], (bwd, ev)
        ahead = 1 if bwd is None else 2
        for i in range(L - 1, 0, -1):
            # while L{i} waits for its parameters, the next units' gathers are in flight
            w = [k for k, e in enumerate(ev) if e == ("all_gather_wait", f"L{i}")][-1]
            for j in range(max(0, i - ahead), i):
                assert ev.index(("all_gather", f"L{j}"), start + 3) < w, (bwd, i, j, ev)


@check(R)
def reduce_scatters_waited_at_end_of_backward():
    model = sharded(fwd=1)
    ev = traced(model)
    same_on_every_rank(ev)
    rs = [k for k, (e, _) in enumerate(ev) if e == "reduce_scatter"]
    waits = [k for k, (e, _) in enumerate(ev) if e == "reduce_scatter_wait"]
    n_params = len(list(model.parameters()))
    assert len(rs) == len(waits) == n_params, ev
    assert max(rs) < min(waits) and ev[-1][0] == "backward_end", ev
    # reduce-scatters go out layer by layer, last layer first
    order = [m for e, m in ev if e == "reduce_scatter"]
    assert order.index("L2") < order.index("L1") < order.index("L0"), order
    ref = make_model()
    x, y = data(0)
    nn.functional.mse_loss(ref(x), y).backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.full_tensor().numpy(), q.grad.numpy(), rtol=1e-5,
                                   atol=1e-6)


@check(R)
def accumulation_without_sync_with_prefetch():
    ref, model = make_model(), sharded(fwd=1, bwd=2)
    for step in range(2):
        x, y = data(step)
        nn.functional.mse_loss(ref(x), y).backward()
        model.set_requires_gradient_sync(step == 1)
        nn.functional.mse_loss(model(mine(x)), mine(y)).backward()
        units = model._fsdp_unit.state.units
        # nothing prefetched is left in flight to be used after the optimizer's step
        assert all(fp.pending is None for u in units for fp in u.params), step
        if step == 0:
            assert all(p.grad is None for p in model.parameters())
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.full_tensor().numpy(), q.grad.numpy(), rtol=1e-5,
                                   atol=1e-6)


@check(R)
def async_unshard_handle():
    model = sharded()
    h = model.layers[0].unshard(async_op=True)
    assert hasattr(model.layers[0][0].weight, "full_tensor")  # still the shard until wait()
    h.wait()
    w = model.layers[0][0].weight
    np.testing.assert_allclose(w.detach().numpy(), make_model().layers[0][0].weight.detach()
                               .numpy())
    model.layers[0].reshard()
    assert hasattr(model.layers[0][0].weight, "full_tensor")


finish(R)
