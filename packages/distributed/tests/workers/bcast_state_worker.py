"""Worker for test_state_dict_broadcast.py (2 ranks): the reload pattern of PyTorch's FSDP2
example: full model and optimizer state gathered to rank 0, then loaded into a fresh model built
on the meta device with `broadcast_from_rank0=True` while the other ranks pass empty dicts."""
from worker_check import check, finish

import ember
import ember.distributed as dist
import ember.nn as nn
from ember.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from ember.distributed.fsdp import fully_shard
from ember.distributed.tensor import DTensor

dist.init_process_group("gloo")
R = dist.get_rank()
FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)
LOAD = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)


def build():
    m = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4))
    for layer in (m[0], m[2]):
        fully_shard(layer)
    fully_shard(m)
    return m


def step(m, opt, seed):
    ember.manual_seed(seed)
    x = ember.randn(4, 6)
    loss = m(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.item()


ember.manual_seed(0)
a = build()
opt_a = ember.optim.Adam(a.parameters(), lr=0.05)
for s in range(2):
    step(a, opt_a, 10 + s)
msd = get_model_state_dict(a, options=FULL)
osd = get_optimizer_state_dict(a, opt_a, options=FULL)
if R != 0:
    msd, osd = {}, {}

with ember.device("meta"):
    b = build()
b_meta = all(p.device.type == "meta" for p in b.parameters())
set_model_state_dict(b, msd, options=LOAD)
opt_b = ember.optim.Adam(b.parameters(), lr=0.05)
set_optimizer_state_dict(b, opt_b, osd, options=LOAD)


@check(R)
def model_loaded_from_rank0():
    assert b_meta
    for (n, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert isinstance(pb, DTensor) and pb.device.type == "cpu", (n, type(pb), pb.device)
        assert pb.placements == pa.placements, n
        assert ember.equal(pa.to_local(), pb.to_local()), n


@check(R)
def optimizer_state_loaded_from_rank0():
    sa, sb = opt_a.state_dict()["state"], opt_b.state_dict()["state"]
    assert sorted(sa) == sorted(sb) and len(sa) == 4, (sorted(sa), sorted(sb))
    for i in sa:
        for k in sa[i]:
            va, vb = sa[i][k], sb[i][k]
            va = va.to_local() if isinstance(va, DTensor) else va
            vb = vb.to_local() if isinstance(vb, DTensor) else vb
            assert ember.equal(va, vb), (i, k)


@check(R)
def training_continues_equally():
    for s in range(2):
        la, lb = step(a, opt_a, 20 + s), step(b, opt_b, 20 + s)
        assert la == lb, (s, la, lb)


finish(R)
