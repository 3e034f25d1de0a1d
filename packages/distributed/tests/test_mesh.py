"""DeviceMesh (2x2 on 4 MPI ranks: groups per dim, slicing), functional collectives (eager and in
ember.compile) and DTensor (distribute, redistribute between placements, Partial), against numpy
(workers/mesh_worker.py)."""

from mpi_launch import worker_suite

globals().update(worker_suite(
    "mesh_worker.py", sizes=(4,), timeout=180,
    expect=("functional_collectives", "functional_collectives_autograd"), min_checks=4))
