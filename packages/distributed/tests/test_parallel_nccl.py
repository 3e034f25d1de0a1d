"""DTensor, tensor parallel and fully_shard on cuda tensors through the NCCL engine, on 2 CPU
ranks: ember-devices' fake cuda device (EMBER_CUDA_FAKE=1, Triton's interpreter) and the nccl4py
stand-in of workers/fake_nccl (workers/parallel_nccl_worker.py; gpu_nccl_check.py runs the same
worker on GPUs with the real library)."""

from mpi_launch import fake_nccl_env, worker_suite

globals().update(worker_suite(
    "parallel_nccl_worker.py", sizes=(2,), timeout=240, env=fake_nccl_env,
    expect=("fully_shard_training", "fully_shard_cpu_offload"), min_checks=4))
