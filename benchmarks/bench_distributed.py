"""ember.distributed vs torch.distributed (gloo) on 2 CPU ranks, in one mpiexec run: all_reduce
bus bandwidth over message sizes (1 KB to --max-mb, x4 apart), and one DDP training step of the
workloads' GPT (its CPU configuration: 4 layers, n_embd 128, block 128; batch 16 split over the
ranks), with DDP (default, and gradient_as_bucket_view=True) and without.

    python benchmarks/bench_distributed.py [--max-mb 256] [--n 2]

Each rank joins both frameworks' groups (ember over Open MPI, torch over gloo on another port)
and times the same work with each, alternating, median of reps. Rank 0 prints a table.
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def median_time(fn, sync, reps):
    fn()
    sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2]


def worker(max_mb):
    import numpy as np
    import torch
    import torch.distributed as tdist

    import ember
    import ember.distributed as edist
    sys.path.insert(0, HERE)
    from workloads import gpt

    r, n = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
    edist.init_process_group("gloo")
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TPORT']}",
                             rank=r, world_size=n)
    torch.set_num_threads(1)
    rows = []
    size = 1024
    while size <= max_mb * 2**20:
        k = size // 4
        reps = 20 if size < 2**20 else (5 if size < 2**26 else 3)
        a = np.ones(k, np.float32)
        et, tt = ember.tensor(a), torch.from_numpy(a.copy())
        te = median_time(lambda et=et: edist.all_reduce(et), edist.barrier, reps)
        tt_ = median_time(lambda tt=tt: tdist.all_reduce(tt), tdist.barrier, reps)
        bus = 2 * (n - 1) / n * size / 1e9  # GB moved per rank for a ring all-reduce
        rows.append((f"all_reduce {size // 1024} KB", tt_ * 1e3, te * 1e3, bus / tt_, bus / te))
        size *= 4
    cfg = dict(vocab=65, block=128, n_layer=4, n_head=4, n_embd=128)  # workloads.py's CPU GPT
    fns, syncs = {}, {}
    for name, lib, dist_mod, DDP in [
            ("torch", torch, tdist, torch.nn.parallel.DistributedDataParallel),
            ("ember", ember, edist, __import__("ember.nn.parallel").nn.parallel
             .DistributedDataParallel)]:
        lib.manual_seed(0)
        idx = lib.randint(0, cfg["vocab"], (16 // n, cfg["block"]))
        for wrap in ("ddp", "ddp_view", "local"):
            model = gpt(lib, **cfg)
            if wrap != "local":
                model = DDP(model, gradient_as_bucket_view=wrap == "ddp_view")
            opt = lib.optim.AdamW(model.parameters(), lr=1e-3)

            def step(model=model, opt=opt, idx=idx):
                opt.zero_grad()
                model(idx, idx).backward()
                opt.step()
            fns[name, wrap], syncs[name, wrap] = step, dist_mod.barrier
    # interleaved rounds (the load on this shared machine drifts): median of 5 per config
    # (also the process's CPU time per step, all threads: on a loaded host the wall time is
    # mostly waiting for a core)
    times = {k: [] for k in fns}
    cpu = {k: [] for k in fns}
    for k in fns:
        fns[k]()
    for _ in range(5):
        for k, fn in fns.items():
            c0 = time.process_time()
            times[k].append(median_time(fn, syncs[k], 1))
            cpu[k].append(time.process_time() - c0)
    steps = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    cpus = {k: sorted(v)[len(v) // 2] for k, v in cpu.items()}
    if r == 0:
        print(f"{'figure':28s} {'torch ms':>10s} {'ember ms':>10s} {'ratio':>7s} "
              f"{'torch GB/s':>10s} {'ember GB/s':>10s}")
        for name, t, e, bt, be in rows:
            print(f"{name:28s} {t:10.3f} {e:10.3f} {e / t:6.2f}x {bt:10.3f} {be:10.3f}")
        for wrap in ("ddp", "ddp_view", "local"):
            t, e = steps["torch", wrap] * 1e3, steps["ember", wrap] * 1e3
            label = f"{wrap}_step (GPT 4x128, bs {16 // n}x128)"
            tc, ec = cpus["torch", wrap] * 1e3, cpus["ember", wrap] * 1e3
            print(f"{label:28s} {t:10.2f} {e:10.2f} {e / t:6.2f}x   CPU ms (2 steps, all "
                  f"threads): torch {tc:.0f} ember {ec:.0f} ({ec / tc:.2f}x)")
        print(f"load average after: {os.getloadavg()}")
    tdist.destroy_process_group()
    edist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max-mb", type=int, default=256)
    p.add_argument("--n", type=int, default=2)
    p.add_argument("--worker", action="store_true")
    a = p.parse_args()
    if a.worker:
        return worker(a.max_mb)
    from ember.distributed._launcher import free_port
    from ember.distributed._mpi import mpi_env, mpiexec_cmd
    env = mpi_env()
    env.update(TPORT=str(free_port()), OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    print(f"load average before: {os.getloadavg()}", flush=True)
    cmd = mpiexec_cmd(a.n) + [sys.executable, "-u", os.path.abspath(__file__), "--worker",
                              "--max-mb", str(a.max_mb)]
    return subprocess.run(cmd, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
