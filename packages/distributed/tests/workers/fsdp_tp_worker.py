"""Worker (mpiexec, 4 ranks): FSDP + TP on a 2-D ("dp", "tp") mesh of 2 x 2. parallelize_module on
mesh["tp"] then fully_shard on mesh["dp"]; training equals single-process training on the whole
batch (losses, gradients, parameters after AdamW steps)."""
import numpy as np
from worker_check import check, finish

import ember
import ember.distributed as dist
import ember.nn as nn
from ember.distributed.device_mesh import init_device_mesh
from ember.distributed.fsdp import fully_shard
from ember.distributed.tensor import DTensor, Shard, distribute_tensor
from ember.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

dist.init_process_group("gloo")
R, N = dist.get_rank(), dist.get_world_size()
assert N == 4, "run with 4 ranks"
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
dp_mesh, tp_mesh = mesh["dp"], mesh["tp"]
DP = dp_mesh.get_local_rank()
B = 4  # global batch; each dp rank takes 2 rows, the tp ranks of one dp rank the same rows


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.fc1, self.fc2 = nn.Linear(8, 12), nn.Linear(12, 8)

    def forward(self, x):
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(5, 8)
        self.layers = nn.ModuleList(Block() for _ in range(2))
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        x = self.inp(x)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def make_model():
    ember.manual_seed(0)
    return Net()


def two_d(model, **kw):
    for layer in model.layers:
        parallelize_module(layer, tp_mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    for layer in model.layers:
        fully_shard(layer, mesh=dp_mesh, **kw)
    return fully_shard(model, mesh=dp_mesh, **kw)


def data(step):
    g = ember.Generator().manual_seed(7 + step)
    return ember.randn(B, 5, generator=g), ember.randn(B, 3, generator=g)


def mine(t):
    return t[2 * DP:2 * DP + 2]


def gathered(model):
    """{name: whole parameter} through each FSDP parameter's own gather (dp, then tp)."""
    fps = {id(fp.sharded): fp for u in model._fsdp_unit.state.units for fp in u.params}
    out = {}
    for name, p in model.named_parameters():
        fp = fps[id(p)]
        full = fp.wrap_full(fp.gather())
        out[name] = (full.full_tensor() if isinstance(full, DTensor) else full).numpy()
    return out


def global_loss(loss):
    t = loss.detach().clone()
    dist.all_reduce(t, group=dp_mesh.get_group())
    return t.item() / dp_mesh.size()


@check(R)
def parameters_are_2d_dtensors():
    model = two_d(make_model())
    w = model.layers[0].fc1.weight
    assert isinstance(w, DTensor) and w.device_mesh.ndim == 2, w
    assert w.placements == (Shard(0), Shard(0)), w.placements
    assert tuple(w.shape) == (12, 8) and tuple(w.to_local().shape) == (3, 8)
    w2 = model.layers[0].fc2.weight
    assert w2.placements == (Shard(0), Shard(1)) and tuple(w2.to_local().shape) == (4, 6)
    assert model.inp.weight.placements == (Shard(0),)  # FSDP only (not TP)
    assert type(w.placements[0]).__name__ == "_StridedShard"  # dp splits the TP piece
    ref = make_model()
    refs = dict(ref.named_parameters())
    for name, v in gathered(model).items():
        np.testing.assert_allclose(v, refs[name].detach().numpy(), err_msg=name)
    # the 2-D DTensors describe their layout: full_tensor and distribute_tensor agree with it
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.full_tensor().detach().numpy(), refs[name].detach().numpy(),
                                   err_msg=name)
        d = distribute_tensor(refs[name].detach(), p.device_mesh, p.placements)
        np.testing.assert_allclose(d.to_local().numpy(), p.to_local().detach().numpy(),
                                   err_msg=name)


@check(R)
def training_equals_single_process():
    for kw in ({}, {"reshard_after_forward": False}):
        ref, model = make_model(), two_d(make_model(), **kw)
        o_ref = ember.optim.AdamW(ref.parameters(), lr=0.01)
        o = ember.optim.AdamW(model.parameters(), lr=0.01)
        for step in range(3):
            x, y = data(step)
            l_ref = nn.functional.mse_loss(ref(x), y)
            l_ref.backward()
            loss = nn.functional.mse_loss(model(mine(x)), mine(y))
            loss.backward()
            np.testing.assert_allclose(global_loss(loss), l_ref.item(), rtol=1e-5)
            if step == 0:  # gradients, through the same gather as the parameters
                fps = {id(fp.sharded): fp for u in model._fsdp_unit.state.units
                       for fp in u.params}
                for name, p in model.named_parameters():
                    fp = fps[id(p)]
                    g = p.grad._local_tensor
                    n = dp_mesh.size()
                    rows = -(-fp.lshape[0] // n) if fp.lshape else 0
                    if fp.lshape:
                        g = ember.cat([g, g.new_zeros((rows - g.shape[0], *g.shape[1:]))])
                        whole = ember.empty((n * rows, *g.shape[1:]))
                        dist.all_gather_into_tensor(whole, g.contiguous(),
                                                    group=dp_mesh.get_group())
                        g = whole[:fp.lshape[0]]
                    g = fp.wrap_full(g)
                    g = g.full_tensor() if isinstance(g, DTensor) else g
                    q = dict(ref.named_parameters())[name].grad
                    np.testing.assert_allclose(g.numpy(), q.numpy(), rtol=1e-4, atol=1e-6,
                                               err_msg=name)
            o_ref.step()
            o_ref.zero_grad()
            o.step()
            o.zero_grad()
        for name, v in gathered(model).items():
            want = dict(ref.named_parameters())[name].detach().numpy()
            np.testing.assert_allclose(v, want, rtol=1e-4, atol=1e-5, err_msg=name)
            full = dict(model.named_parameters())[name].full_tensor().detach().numpy()
            np.testing.assert_allclose(full, want, rtol=1e-4, atol=1e-5, err_msg=name)


@check(R)
def wrong_mesh_is_refused():
    model = make_model()
    parallelize_module(model.layers[0], tp_mesh, {"fc1": ColwiseParallel()})
    other = init_device_mesh("cpu", (4,))
    try:
        fully_shard(model.layers[0], mesh=other)
    except NotImplementedError as e:
        assert "mesh['dp']" in str(e), e
    else:
        raise AssertionError("fully_shard accepted a TP parameter with an unrelated mesh")


finish(R)
