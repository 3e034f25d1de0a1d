"""Worker (mpiexec, 2 or 3 ranks): fully_shard training equals single-process training on the
same data (losses and parameters after several steps), gradient accumulation without sync,
unshard/reshard, mixed precision."""
import numpy as np
from worker_check import check, finish

import ember
import ember.distributed as dist
import ember.nn as nn
from ember.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from ember.distributed.tensor import DTensor, Shard, init_device_mesh

dist.init_process_group("gloo")
R, N = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (N,))
B = 2 * N  # global batch: each rank takes 2 rows


def make_model():
    ember.manual_seed(0)  # the same initial weights on every rank
    return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 7), nn.LayerNorm(7),
                         nn.Linear(7, 3))


def data(step):
    g = ember.Generator().manual_seed(100 + step)
    return ember.randn(B, 6, generator=g), ember.randn(B, 3, generator=g)


def mine(t):
    return t[2 * R:2 * R + 2]


def shard_model(model, **kw):
    for layer in model:
        if any(True for _ in layer.parameters()):
            fully_shard(layer, mesh=mesh, **kw)
    return fully_shard(model, mesh=mesh, **kw)


def global_loss(loss):
    t = loss.detach().clone()
    dist.all_reduce(t)
    return t.item() / N


def assert_same_params(sharded, ref, tol=1e-5):
    for (name, p), (_, q) in zip(sharded.named_parameters(), ref.named_parameters()):
        assert isinstance(p, DTensor), name
        np.testing.assert_allclose(p.full_tensor().detach().numpy(), q.detach().numpy(),
                                   rtol=tol, atol=tol, err_msg=name)


def train(opt_cls, steps=3, **kw):
    ref = make_model()
    model = shard_model(make_model(), **kw)
    o_ref, o = opt_cls(ref.parameters()), opt_cls(model.parameters())
    for step in range(steps):
        x, y = data(step)
        o_ref.zero_grad()
        l_ref = nn.functional.mse_loss(ref(x), y)
        l_ref.backward()
        o_ref.step()
        o.zero_grad()
        loss = nn.functional.mse_loss(model(mine(x)), mine(y))
        loss.backward()
        o.step()
        np.testing.assert_allclose(global_loss(loss), l_ref.item(), rtol=1e-5)
    assert_same_params(model, ref)
    return model


@check(R)
def params_are_shards():
    model = shard_model(make_model())
    assert isinstance(model, FSDPModule) and isinstance(model[0], FSDPModule)
    w = model[0].weight
    assert isinstance(w, DTensor) and w.placements == (Shard(0),) and w.shape == (5, 6)
    sizes = [-(-5 // N)] * (5 // -(-5 // N)) + [5 - (5 // -(-5 // N)) * -(-5 // N)]
    assert w.to_local().shape[0] == (sizes + [0] * N)[R], (w.to_local().shape, sizes)
    assert all(isinstance(v, DTensor) for v in model.state_dict().values())


@check(R)
def training_sgd_equals_single_process():
    train(lambda ps: ember.optim.SGD(ps, lr=0.1, momentum=0.9))


@check(R)
def training_adamw_no_reshard_equals_single_process():
    train(lambda ps: ember.optim.AdamW(ps, lr=0.01), reshard_after_forward=False)


@check(R)
def cpu_offload_policy_on_a_cpu_mesh():
    """fully_shard(offload_policy=CPUOffloadPolicy()) on a CPU mesh: shards already on the host,
    the same training; a policy of another type is refused (the cuda case:
    parallel_nccl_worker.py)."""
    from ember.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy
    model = train(lambda ps: ember.optim.AdamW(ps, lr=0.01),
                  offload_policy=CPUOffloadPolicy(pin_memory=False))
    assert all(p._local_tensor.device.type == "cpu" for p in model.parameters())
    shard_model(make_model(), offload_policy=OffloadPolicy())
    try:
        fully_shard(make_model(), mesh=mesh, offload_policy="cpu")
    except TypeError as e:
        assert "offload_policy must be an OffloadPolicy" in str(e), e
    else:
        raise AssertionError("a str offload_policy was accepted")


@check(R)
def reshard_regathers_in_backward():
    model = shard_model(make_model())
    x, y = data(0)
    loss = nn.functional.mse_loss(model(mine(x)), mine(y))
    # after forward the modules hold the shards again, not gathered parameters
    assert isinstance(model[0].weight, DTensor)
    from ember.distributed.fsdp import _param as impl
    calls = []
    gather = impl.FSDPParam.gather
    impl.FSDPParam.gather = lambda fp: calls.append(fp.name) or gather(fp)
    try:
        loss.backward()
    finally:
        impl.FSDPParam.gather = gather
    assert "weight" in calls, calls  # the saved weights were gathered again for backward
    ref = make_model()
    nn.functional.mse_loss(ref(x), y).backward()
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        assert p.grad.placements == p.placements
        np.testing.assert_allclose(p.grad.full_tensor().numpy(), q.grad.numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=name)


@check(R)
def gradient_accumulation_without_sync():
    ref = make_model()
    model = shard_model(make_model())
    for step in range(2):
        x, y = data(step)
        nn.functional.mse_loss(ref(x), y).backward()
        model.set_requires_gradient_sync(step == 1)
        nn.functional.mse_loss(model(mine(x)), mine(y)).backward()
        if step == 0:
            assert all(p.grad is None for p in model.parameters())
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.grad.full_tensor().numpy(), q.grad.numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=name)


@check(R)
def unshard_and_reshard():
    model = shard_model(make_model())
    model[0].unshard()
    w = model[0].weight
    assert not isinstance(w, DTensor) and tuple(w.shape) == (5, 6)
    np.testing.assert_allclose(w.detach().numpy(), make_model()[0].weight.detach().numpy())
    model[0].reshard()
    assert isinstance(model[0].weight, DTensor)


@check(R)
def mixed_precision_param_dtype():
    seen = []
    model = shard_model(make_model(), mp_policy=MixedPrecisionPolicy(
        param_dtype=ember.float64, reduce_dtype=ember.float64))
    # (a pre-hook registered after fully_shard's sees the gathered parameter)
    model[0].register_forward_pre_hook(lambda m, a: seen.append(m.weight.dtype))
    model[0].register_forward_hook(lambda m, a, o: seen.append(o.dtype))
    x, y = data(0)
    out = model(mine(x))
    assert seen == [ember.float64, ember.float64], seen
    nn.functional.mse_loss(out, mine(y).double()).backward()
    ref = make_model()
    nn.functional.mse_loss(ref(x), y).backward()
    g = model[0].weight.grad
    assert g.dtype == ember.float32
    np.testing.assert_allclose(g.full_tensor().numpy(), ref[0].weight.grad.numpy(), rtol=1e-4,
                               atol=1e-6)


finish(R)
