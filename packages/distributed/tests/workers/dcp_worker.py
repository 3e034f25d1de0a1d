"""Worker for the distributed checkpoint test: `save DIR` (3 ranks: FSDP model + AdamW state
after two steps, a tensor-parallel DTensor, a Partial one, plain values) and `load DIR` (2 ranks:
the same state loaded into another world size and other placements, then one more training
step equal to the saver's)."""
import os
import sys

import numpy as np
from worker_check import check, finish

import ember
import ember.distributed as dist
import ember.distributed.checkpoint as dcp
import ember.nn as nn
from ember.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from ember.distributed.fsdp import fully_shard
from ember.distributed.tensor import (
    DTensor,
    Partial,
    Replicate,
    Shard,
    distribute_tensor,
    init_device_mesh,
)
from ember.utils.safetensors import load_file, save_file

MODE, DIR = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
R, N = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (N,))
ROWS = 6 // N  # a global batch of 6 rows on 2 or 3 ranks
T = ember.arange(20.0).reshape(4, 5)


def make_model(seed):
    ember.manual_seed(seed)
    m = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 7), nn.Linear(7, 3))
    for layer in m:
        if any(True for _ in layer.parameters()):
            fully_shard(layer, mesh=mesh)
    return fully_shard(m, mesh=mesh)


def step(model, opt, k):
    g = ember.Generator().manual_seed(100 + k)
    x, y = ember.randn(6, 6, generator=g), ember.randn(6, 3, generator=g)
    opt.zero_grad()
    nn.functional.mse_loss(model(x[R * ROWS:(R + 1) * ROWS]), y[R * ROWS:(R + 1) * ROWS]).backward()
    opt.step()


def full_params(model):
    return {n: p.full_tensor().detach().contiguous() for n, p in model.named_parameters()}


def state(model, opt, tp_layout, partial_layout):
    msd, osd = get_state_dict(model, opt)
    tp = distribute_tensor(T, mesh, [tp_layout])
    part = distribute_tensor(T * 2, mesh, [partial_layout])
    return {"model": msd, "optim": osd, "tp": tp, "part": part, "epoch": 0, "tag": ""}


if MODE == "save":
    @check(R)
    def save_sharded():
        model = make_model(0)
        opt = ember.optim.AdamW(model.parameters(), lr=0.05)
        for k in range(2):
            step(model, opt, k)
        sd = state(model, opt, Shard(1), Replicate())
        sd["part"] = DTensor.from_local(sd["part"].to_local() / N, mesh, [Partial()])
        sd["epoch"], sd["tag"] = 7, "two steps"
        dcp.save(sd, checkpoint_id=DIR)
        ref = full_params(model)
        step(model, opt, 2)
        after = {"after." + n: t for n, t in full_params(model).items()}
        if R == 0:
            save_file(dict(ref, **after), os.path.join(DIR, "reference.safetensors"))
        try:
            dcp.save({"bad": object()}, checkpoint_id=DIR + "_bad")
        except TypeError as e:
            assert "bad" in str(e) and "pickl" in str(e), e
        else:
            raise AssertionError("an arbitrary object was saved")
else:
    @check(R)
    def load_resharded():
        ref = load_file(os.path.join(DIR, "reference.safetensors"))
        model = make_model(1)  # other initial values: the load must replace them
        opt = ember.optim.AdamW(model.parameters(), lr=0.05)
        step(model, opt, 0)  # creates the optimizer state that the load overwrites
        sd = state(model, opt, Shard(0), Replicate())
        sd["tp"].to_local().zero_()
        dcp.load(sd, checkpoint_id=DIR)
        set_state_dict(model, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
        assert sd["epoch"] == 7 and sd["tag"] == "two steps", (sd["epoch"], sd["tag"])
        np.testing.assert_array_equal(sd["tp"].full_tensor().numpy(), T.numpy())
        np.testing.assert_array_equal(sd["part"].full_tensor().numpy(), (T * 2).numpy())
        for n, t in full_params(model).items():
            np.testing.assert_allclose(t.numpy(), ref[n].numpy(), rtol=1e-6, err_msg=n)
        step(model, opt, 2)  # training resumes exactly where the 3-rank run was
        for n, t in full_params(model).items():
            np.testing.assert_allclose(t.numpy(), ref["after." + n].numpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=n)
        try:
            dcp.load({"missing": ember.zeros(2)}, checkpoint_id=DIR)
        except RuntimeError as e:
            assert "missing" in str(e)
        else:
            raise AssertionError("a key the checkpoint lacks loaded")

finish(R)
