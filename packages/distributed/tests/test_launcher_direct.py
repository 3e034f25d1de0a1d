"""python -m ember.distributed.run without mpiexec (EMBER_LAUNCHER=direct, what a host without
Open MPI gets): the launcher starts the workers itself with torchrun's environment, and the first
failure ends the others and is reported by rank."""
import os
import subprocess
import sys
import time

from mpi_launch import HERE, child_env

SCRIPT = os.path.join(HERE, "workers", "direct_launch_script.py")


def run(mode, timeout=120):
    cmd = [sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", "2", SCRIPT, mode]
    return subprocess.run(cmd, env=child_env({"EMBER_LAUNCHER": "direct"}), capture_output=True,
                          text=True, timeout=timeout)


def test_direct_launch_env_and_cpu_collective_error():
    proc = run("ok")
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = sorted(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    assert len(res) == 2, proc.stdout
    for r, line in enumerate(res):
        head, err = line.split(" | ")
        assert head == f"RESULT {r} 2 {r} {r} False", line
        assert "all_reduce: the MPI engine (backend 'gloo'/'mpi') needs its 2 processes " \
               "started by mpiexec" in err, err


def test_direct_launch_failure_ends_the_others():
    t0 = time.monotonic()
    proc = run("raise")
    assert proc.returncode == 1
    assert "FAILED: rank 1 (local_rank 1" in proc.stderr, proc.stderr[-3000:]
    assert "ValueError: boom on rank 1" in proc.stderr
    assert time.monotonic() - t0 < 100  # rank 0's 120 s sleep was cut short


def test_direct_launch_killed_rank_is_named():
    proc = run("kill")
    assert proc.returncode == 1
    assert "FAILED: rank 1" in proc.stderr and "killed by signal 9" in proc.stderr, \
        proc.stderr[-3000:]


def test_explicit_gloo_without_mpiexec_raises_at_init():
    code = ("import ember.distributed as d\n"
            "try:\n    d.init_process_group('gloo')\nexcept RuntimeError as e:\n"
            "    print('ERR', e)\n")
    env = child_env({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                     "MASTER_PORT": "1"})
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)
    assert "ERR init_process_group: the MPI engine (backend 'gloo'/'mpi') needs its 2 " \
           "processes started by mpiexec" in proc.stdout, proc.stdout + proc.stderr[-2000:]
