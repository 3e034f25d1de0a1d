"""Functional collectives inside ember.compile with the default backend on 2 MPI ranks: the
collectives start asynchronously and the compiled graph waits for them
(workers/funcol_compile_worker.py)."""
from mpi_launch import worker_suite

globals().update(worker_suite(
    "funcol_compile_worker.py", sizes=(2,), timeout=180,
    expect=("default_backend_equals_eager",)))
