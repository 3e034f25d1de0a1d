"""Every collective on 4 MPI ranks against a single-process numpy reference, with every
collective of 64 bytes and more run as a blocking MPI call on the MPI engine's communication
thread (EMBER_MPI_BLOCKING_BYTES=64; by default only those of 1 MiB and more), the small ones
queued behind them: same results, same timeouts (workers/collectives_worker.py)."""
from mpi_launch import worker_suite

globals().update(worker_suite(
    "collectives_worker.py", sizes=((4, {"EMBER_MPI_BLOCKING_BYTES": "64"}),), timeout=180,
    expect=("timeouts_raise", "large_messages_on_the_comm_thread"), min_checks=15))
