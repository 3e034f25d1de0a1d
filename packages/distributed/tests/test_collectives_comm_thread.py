"""Every collective on 4 MPI ranks against a single-process numpy reference, with every
collective of 64 bytes and more run on the MPI engine's communication thread
(EMBER_MPI_BLOCKING_BYTES=64; by default only those of 16 MiB and more; all_reduce in pieces of
EMBER_MPI_PIECE_BYTES), the small ones queued behind them: same results, same timeouts
(workers/collectives_worker.py)."""
from mpi_launch import worker_suite

globals().update(worker_suite(
    "collectives_worker.py", sizes=((4, {"EMBER_MPI_BLOCKING_BYTES": "64",
                                          "EMBER_MPI_PIECE_BYTES": "4000"}),), timeout=180,
    expect=("timeouts_raise", "large_messages_on_the_comm_thread"), min_checks=15))
