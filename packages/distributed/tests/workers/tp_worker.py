"""Worker (mpiexec, 2 or 4 ranks): tensor parallel (parallelize_module with Colwise/Rowwise/
Sequence parallel and PrepareModuleInput) equals the single-process model: outputs and grads."""
import copy

import numpy as np
from worker_check import check, finish

import ember
import ember.distributed as dist
import ember.nn as nn
import ember.nn.functional as F
from ember.distributed.tensor import DTensor, Replicate, Shard, init_device_mesh
from ember.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
    loss_parallel,
    parallelize_module,
)

dist.init_process_group("gloo")
R, N = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (N,))


class MLP(nn.Module):
    def __init__(self, d=8, h=16):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(self.norm(x))))


class Block(nn.Module):
    """Pre-norm transformer block; heads are found from the local width (`view(B, T, -1, hd)`),
    so the same code runs whole and tensor-parallel."""

    def __init__(self, d=16, heads=4):
        super().__init__()
        self.hd = d // heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.mlp = MLP(d, 4 * d)
        self.mlp.norm = nn.Identity()

    def forward(self, x):
        B, T, _ = x.shape
        h = self.ln1(x)
        q, k, v = (m(h).view(B, T, -1, self.hd).transpose(1, 2) for m in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)   # (B, nh_local, T, hd)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, -1))
        return x + self.mlp(self.ln2(x))


def compare(model, plan, x, slice_out=None):
    ref = copy.deepcopy(model)
    xr = x.clone().requires_grad_()
    y_ref = ref(xr)
    y_ref.square().sum().backward()
    tp = parallelize_module(model, mesh, plan)
    xt = x.clone().requires_grad_()
    y = tp(xt)
    if isinstance(y, DTensor):
        y = y.full_tensor()
    want = y_ref if slice_out is None else slice_out(y_ref)
    np.testing.assert_allclose(y.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5)
    loss = y.square().sum()
    if slice_out is not None:  # each rank holds a piece of the output: add the pieces' losses
        loss = DTensor.from_local(loss.reshape(1), mesh, [Shard(0)]).sum().full_tensor()
    loss.backward()
    np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (name, p), (_, q) in zip(tp.named_parameters(), ref.named_parameters()):
        g = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
        np.testing.assert_allclose(g.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    return tp


@check(R)
def mlp_colwise_rowwise():
    ember.manual_seed(0)
    m = MLP()
    tp = compare(m, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}, ember.randn(3, 8))
    assert tp.fc1.weight.placements == (Shard(0),) and tp.fc2.weight.placements == (Shard(1),)
    assert tp.fc1.weight.to_local().shape == (16 // N, 8)


@check(R)
def transformer_block():
    ember.manual_seed(1)
    plan = {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
            "o": RowwiseParallel(), "mlp.fc1": ColwiseParallel(), "mlp.fc2": RowwiseParallel()}
    compare(Block(), plan, ember.randn(2, 5, 16))


@check(R)
def sequence_parallel():
    ember.manual_seed(2)
    T = 2 * N
    plan = {"norm": SequenceParallel(),
            "fc1": ColwiseParallel(input_layouts=Shard(1)),
            "fc2": RowwiseParallel(output_layouts=Shard(1))}
    x = ember.randn(2, T, 8)
    # every rank feeds its sequence chunk; each ends with its chunk of the output
    model = MLP()
    ref = copy.deepcopy(model)
    y_ref = ref(x)
    tp = parallelize_module(model, mesh, plan)
    assert tp.norm.weight.placements == (Replicate(),)
    y = tp(x.chunk(N, 1)[R].contiguous())
    np.testing.assert_allclose(y.detach().numpy(), y_ref.chunk(N, 1)[R].detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    y_ref.square().sum().backward()
    loss = DTensor.from_local(y.square().sum().reshape(1), mesh, [Shard(0)]).sum()
    loss.full_tensor().backward()
    for name in ("norm.weight", "fc1.weight", "fc2.weight", "fc2.bias"):
        g = tp.get_parameter(name).grad
        np.testing.assert_allclose(g.full_tensor().numpy(), ref.get_parameter(name).grad.numpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=name)


@check(R)
def prepare_module_input_and_embedding():
    ember.manual_seed(3)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 8)
            self.head = nn.Linear(8, 4)

        def forward(self, idx):
            return self.head(self.emb(idx))

    net = Net()
    ref = copy.deepcopy(net)
    idx = ember.tensor([[1, 5, 10], [0, 2, 2]])
    plan = {"emb": ColwiseParallel(output_layouts=Replicate()),
            "head": PrepareModuleInput(input_layouts=Replicate(),
                                       desired_input_layouts=Replicate(), use_local_output=True)}
    tp = parallelize_module(net, mesh, plan)
    assert tp.emb.weight.placements == (Shard(1),)
    y = tp(idx)
    np.testing.assert_allclose(y.detach().numpy(), ref(idx).detach().numpy(), rtol=1e-5)
    # RowwiseParallel: vocabulary-parallel lookup (11 rows: uneven over 2 and 4 ranks, ids of
    # every rank's rows, a padding row), forward and the weight's gradient
    emb = nn.Embedding(11, 4, padding_idx=2)
    ref_emb = copy.deepcopy(emb)
    vp = parallelize_module(emb, mesh, RowwiseParallel(input_layouts=Replicate(),
                                                       output_layouts=Replicate()))
    assert vp.weight.placements == (Shard(0),)
    out = vp(idx)
    want = ref_emb(idx)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    (out * out).sum().backward()
    (want * want).sum().backward()
    np.testing.assert_allclose(vp.weight.grad.full_tensor().numpy(), ref_emb.weight.grad.numpy(),
                               rtol=1e-5, atol=1e-7)


@check(R)
def training_with_adamw():
    ember.manual_seed(5)
    ref = MLP()
    tp = parallelize_module(copy.deepcopy(ref), mesh, {"fc1": ColwiseParallel(),
                                                       "fc2": RowwiseParallel()})
    o_ref = ember.optim.AdamW(ref.parameters(), lr=0.01)
    o = ember.optim.AdamW(tp.parameters(), lr=0.01)
    losses = {"ref": [], "tp": []}
    for step in range(4):
        x = ember.randn(4, 8, generator=ember.Generator().manual_seed(step))
        for name, model, opt in (("ref", ref, o_ref), ("tp", tp, o)):
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            losses[name].append(loss.item())
    # the loss curve of the tensor-parallel model is the single-process one (and it learns)
    np.testing.assert_allclose(losses["tp"], losses["ref"], rtol=1e-5)
    assert losses["ref"][-1] < losses["ref"][0], losses
    for (name, p), q in zip(tp.named_parameters(), ref.parameters()):
        full = p.full_tensor() if isinstance(p, DTensor) else p
        np.testing.assert_allclose(full.detach().numpy(), q.detach().numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=name)


@check(R)
def clip_grad_norm_and_foreach_adamw():
    ember.manual_seed(6)
    ref = MLP()
    tp = parallelize_module(copy.deepcopy(ref), mesh, {"fc1": ColwiseParallel(),
                                                       "fc2": RowwiseParallel()})
    o_ref = ember.optim.AdamW(ref.parameters(), lr=0.01, foreach=True)
    o = ember.optim.AdamW(tp.parameters(), lr=0.01, foreach=True)
    x = ember.randn(4, 8)
    for model, opt in ((ref, o_ref), (tp, o)):
        (model(x) * 50).square().sum().backward()
        total = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if model is ref:
            want = total
        opt.step()
    total = total.full_tensor() if isinstance(total, DTensor) else total
    np.testing.assert_allclose(total.item(), want.item(), rtol=1e-4)
    assert want.item() > 1.0  # the clipping acted
    for p, q in zip(tp.parameters(), ref.parameters()):
        full = p.full_tensor() if isinstance(p, DTensor) else p
        np.testing.assert_allclose(full.detach().numpy(), q.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)


@check(R)
def loss_parallel_keeps_logits_sharded():
    from ember.distributed.tensor import _redistribute
    ember.manual_seed(7)
    head = nn.Linear(8, 12)
    ref = copy.deepcopy(head)
    x, labels = ember.randn(6, 8), ember.tensor([0, 11, 5, -100, 7, 3])
    w = ember.rand(12) + 0.5
    ref_loss = F.cross_entropy(ref(x), labels, weight=w)
    ref_loss.backward()
    tp = parallelize_module(head, mesh, ColwiseParallel(use_local_output=False))
    logits = tp(x)
    assert logits.placements == (Shard(1),)
    gather = _redistribute._gather
    _redistribute._gather = None  # any all-gather of the logits would fail here
    try:
        with loss_parallel():
            loss = F.cross_entropy(logits, labels, weight=w)
            loss.backward()
    finally:
        _redistribute._gather = gather
    got = loss.full_tensor() if isinstance(loss, DTensor) else loss
    np.testing.assert_allclose(got.item(), ref_loss.item(), rtol=1e-5)
    np.testing.assert_allclose(tp.weight.grad.full_tensor().numpy(), ref.weight.grad.numpy(),
                               rtol=1e-4, atol=1e-6)


@check(R)
def prepare_module_output():
    class Twice(nn.Module):
        def forward(self, x):
            return x * 2

    m = parallelize_module(Twice(), mesh, PrepareModuleOutput(
        output_layouts=Shard(0), desired_output_layouts=Replicate(), use_local_output=True))
    local = ember.full((2, 3), float(R))
    y = m(local)  # each rank's rows, gathered: every rank holds all 2N rows
    assert not isinstance(y, DTensor) and tuple(y.shape) == (2 * N, 3)
    want = np.repeat(np.arange(N, dtype=np.float32) * 2, 2)[:, None] * np.ones((1, 3))
    np.testing.assert_array_equal(y.numpy(), want)


finish(R)
