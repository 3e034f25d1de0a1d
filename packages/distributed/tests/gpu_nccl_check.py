"""On a GPU machine (not collected by pytest): the NCCL engine with real nccl4py on N GPUs,
N processes started here with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (no MPI needed).

    PYTHONPATH=... python packages/distributed/tests/gpu_nccl_check.py [N]   # N = 1: one GPU

Exit 0 when every rank printed only OK checks, for each worker: workers/nccl_worker.py (the
collectives) and workers/parallel_nccl_worker.py (DTensor, tensor parallel, fully_shard), both
with EMBER_REAL_NCCL=1.
"""
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


WORKERS = ("nccl_worker.py", "parallel_nccl_worker.py")


def run(worker: str, n: int) -> bool:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), EMBER_REAL_NCCL="1",
                   PYTHONPATH=os.pathsep.join(p for p in [os.path.join(HERE, "workers"),
                                                          *sys.path] if p))
        procs.append(subprocess.Popen([sys.executable, "-u",
                                       os.path.join(HERE, "workers", worker)],
                                      env=env, stdout=subprocess.PIPE, text=True))
    ok = True
    for p in procs:
        out, _ = p.communicate(timeout=600)
        sys.stdout.write(out)
        ok = ok and p.returncode == 0 and " FAIL " not in out and "CHECK" in out
    print(f"GPU NCCL CHECK {worker}", "PASSED" if ok else "FAILED")
    return ok


def main(n: int) -> int:
    results = [run(w, n) for w in WORKERS]
    print("GPU NCCL CHECK", "PASSED" if all(results) else "FAILED")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1))
