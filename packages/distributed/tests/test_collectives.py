"""Every collective on 2 MPI ranks (one mpiexec run) against a single-process numpy reference;
the worker prints one CHECK line per rank and check (workers/collectives_worker.py).
test_collectives_comm_thread.py runs the same worker on 4 ranks through the communication
thread."""
from mpi_launch import worker_suite

globals().update(worker_suite(
    "collectives_worker.py", sizes=(2,), timeout=180,
    expect=("timeouts_raise", "large_messages_on_the_comm_thread"), min_checks=15))
