"""set_model_state_dict / set_optimizer_state_dict with broadcast_from_rank0 on 2 ranks: rank 0
holds the whole state, rank 1 passes empty dicts, the fresh model was built on the meta device
(workers/bcast_state_worker.py; the reload of PyTorch's FSDP2 example)."""
from mpi_launch import worker_suite

globals().update(worker_suite("bcast_state_worker.py", sizes=(2,), min_checks=3))
