"""ember.multiprocessing.spawn: fn(i, *args) on 2 processes that form a gloo group; a raising
process comes back as ProcessRaisedException with its traceback."""
import os

import pytest

import ember.multiprocessing as emp


def train(i, out_dir, fail_rank):
    import ember
    import ember.distributed as dist
    dist.init_process_group("gloo", rank=i, world_size=2)
    if i == fail_rank:
        raise RuntimeError(f"spawned process {i} failed on purpose")
    t = ember.full((3,), float(i + 1))
    dist.all_reduce(t)
    with open(os.path.join(out_dir, f"rank{i}"), "w") as f:
        f.write(repr(t.tolist()))
    dist.destroy_process_group()


def test_spawn_runs_fn_on_each_rank(tmp_path, monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    assert emp.spawn(train, args=(str(tmp_path), -1), nprocs=2) is None
    for i in range(2):
        assert (tmp_path / f"rank{i}").read_text() == "[3.0, 3.0, 3.0]"


def test_spawn_raises_child_error(tmp_path):
    with pytest.raises(emp.ProcessRaisedException, match="spawned process 1 failed on purpose"):
        emp.spawn(train, args=(str(tmp_path), 1), nprocs=2)
