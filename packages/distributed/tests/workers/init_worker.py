"""Worker (run under mpiexec): init_process_group through file://, tcp:// and env:// (argv[1],
argv[2]: a file path and a free port), ranks given in reverse order of MPI's, then destroy."""
import os
import sys

import ember
import ember.distributed as dist

mpi_rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
N = int(os.environ["OMPI_COMM_WORLD_SIZE"])
path, port = sys.argv[1], int(sys.argv[2])


def check(name, backend="gloo", **kw):
    dist.init_process_group(backend, **kw)
    r = dist.get_rank()
    out = [ember.zeros(1) for _ in range(N)]
    dist.all_gather(out, ember.full((1,), float(r)))
    ok = [o.item() for o in out] == [float(i) for i in range(N)] and dist.get_world_size() == N
    st = dist._group._W.store
    st.set(f"{name}/{r}", f"hello{r}")
    ok = ok and st.get(f"{name}/{(r + 1) % N}") == f"hello{(r + 1) % N}".encode()
    ok = ok and st.add(f"{name}/n", 1) >= 1
    dist.barrier()
    dist.destroy_process_group()
    ok = ok and not dist.is_initialized()
    print(f"CHECK {r} {name} {'OK' if ok else 'FAIL'}", flush=True)


rev = N - 1 - mpi_rank
check("file", init_method=f"file://{path}", rank=rev, world_size=N)
check("tcp", init_method=f"tcp://127.0.0.1:{port}?rank={rev}&world_size={N}")
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port + 1), RANK=str(rev),
                  WORLD_SIZE=str(N))
check("env")
del os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"], os.environ["RANK"]
check("mpi_only", "mpi")  # ranks from MPI, store port told over MPI
