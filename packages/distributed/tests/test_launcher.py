"""python -m ember.distributed.run: torchrun's environment, restarts, and the first failure
reported by rank when a worker raises, hangs (the others time out) or is killed."""
import os
import subprocess
import sys

from mpi_launch import HERE, child_env

SCRIPT = os.path.join(HERE, "workers", "launch_script.py")


def run(mode, *flags, timeout=150):
    cmd = [sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", "2", *flags,
           SCRIPT, mode, "--extra"]
    return subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=timeout)


def results(proc):
    return sorted(line for line in proc.stdout.splitlines() if line.startswith("RESULT"))


def test_restart_after_failure_and_torchrun_env():
    proc = run("restart", "--max_restarts=1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "attempt 1 failed" in proc.stderr and "boom on rank 1 (attempt 0)" in proc.stderr
    res = results(proc)
    assert len(res) == 2, proc.stdout
    for r, line in enumerate(res):
        assert line.startswith(f"RESULT {r} [3.0, 3.0]"), line
        for kv in [("RANK", str(r)), ("LOCAL_RANK", str(r)), ("WORLD_SIZE", "2"),
                   ("LOCAL_WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1"),
                   ("TORCHELASTIC_RESTART_COUNT", "1")]:
            assert repr(kv) in line, (kv, line)
        assert "['restart', '--extra']" in line


def test_raising_rank_is_reported_and_others_stopped():
    proc = run("raise")
    assert proc.returncode == 1
    assert "FAILED: rank 1 (local_rank 1" in proc.stderr, proc.stderr[-3000:]
    assert "ValueError: boom on rank 1 (attempt 0)" in proc.stderr
    assert results(proc) == []


def test_hanging_rank_others_time_out():
    proc = run("hang")
    assert proc.returncode == 1
    assert "FAILED: rank 0 (local_rank 0" in proc.stderr, proc.stderr[-3000:]
    assert "DistBackendError: all_reduce: timed out after 3.0 s on rank 0" in proc.stderr


def test_killed_rank_is_named():
    proc = run("kill")
    assert proc.returncode == 1
    assert "FAILED: rank 1" in proc.stderr and "killed" in proc.stderr, proc.stderr[-3000:]
