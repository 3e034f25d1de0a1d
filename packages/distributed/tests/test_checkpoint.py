"""Distributed checkpoint: saved by 3 ranks (FSDP + AdamW, tensor-parallel and Partial DTensors,
plain values), loaded by 2 ranks into other placements and by one process into a plain model;
files are safetensors + JSON (workers/dcp_worker.py)."""

import json
import os

import numpy as np
import pytest
from mpi_launch import assert_check, checks, mpirun

import ember
import ember.distributed.checkpoint as dcp
import ember.nn as nn


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("dcp") / "ckpt")
    proc = mpirun("dcp_worker.py", 3, args=("save", d), timeout=180)
    return d, proc, checks(proc)


def test_save_on_three_ranks(ckpt):
    _, proc, got = ckpt
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for r in range(3):
        assert_check((proc, got), r, "save_sharded")


def test_load_on_two_ranks(ckpt):
    d, _, _ = ckpt
    proc = mpirun("dcp_worker.py", 2, args=("load", d), timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for r in range(2):
        assert_check((proc, checks(proc)), r, "load_resharded")


def test_load_into_one_process(ckpt):
    d, _, _ = ckpt
    model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 7), nn.Linear(7, 3))
    sd = {"model": model.state_dict(), "epoch": 0}
    dcp.load(sd, checkpoint_id=d, no_dist=True)
    assert sd["epoch"] == 7
    from ember.utils.safetensors import load_file
    ref = load_file(os.path.join(d, "reference.safetensors"))
    for n, p in model.named_parameters():
        np.testing.assert_allclose(p.detach().numpy(), ref[n].numpy(), rtol=1e-6, err_msg=n)


def test_files_are_json_and_safetensors(ckpt):
    d, _, _ = ckpt
    with open(os.path.join(d, ".metadata")) as f:
        meta = json.load(f)  # plain JSON: nothing in a checkpoint is unpickled
    assert meta["values"]['["epoch"]'] == 7
    files = sorted(f for f in os.listdir(d) if f.startswith("__"))
    assert files == ["__0_0.safetensors", "__1_0.safetensors", "__2_0.safetensors"]
    import safetensors
    with safetensors.safe_open(os.path.join(d, files[1]), framework="numpy") as f:
        assert len(list(f.keys())) > 0


def test_missing_key_and_bad_values(tmp_path):
    dcp.save({"w": ember.ones(3), "n": 2}, checkpoint_id=str(tmp_path), no_dist=True)
    with pytest.raises(RuntimeError, match="Missing key"):
        dcp.load({"v": ember.ones(3)}, checkpoint_id=str(tmp_path), no_dist=True)
    with pytest.raises(RuntimeError, match="size mismatch"):
        dcp.load({"w": ember.ones(4)}, checkpoint_id=str(tmp_path), no_dist=True)
    with pytest.raises(TypeError, match="no pickling"):
        dcp.save({"f": lambda: 0}, checkpoint_id=str(tmp_path), no_dist=True)
    out = {"w": ember.zeros(3), "n": 0}
    dcp.load(out, checkpoint_id=str(tmp_path), no_dist=True)
    assert out["w"].tolist() == [1.0, 1.0, 1.0] and out["n"] == 2
