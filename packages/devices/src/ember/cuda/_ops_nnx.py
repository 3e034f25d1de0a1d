"""GPU kernels: pooling, resampling, normalization, convolution variants and other nn ops.

TABLE maps op qualnames to kernels `f(backend, op, *args)` (see _ops.kernel: return
NotImplemented to fall back); HOST lists the ops of this family that still run their CPU kernel on
host copies, with the reason (test_cuda_opdb.py holds the backend to it)."""
from __future__ import annotations

TABLE: dict = {}

HOST: dict[str, str] = {
    "_adaptive_avg_pool": "no GPU kernel yet",
    "_adaptive_avg_pool_backward": "no GPU kernel yet",
    "_adaptive_max_pool": "no GPU kernel yet",
    "_avg_pool_backward": "no GPU kernel yet",
    "_ctc_loss": "no GPU kernel yet",
    "_ctc_loss_backward_ember": "no GPU kernel yet",
    "_native_batch_norm_legit_functional": "no GPU kernel yet",
    "_upsample": "no GPU kernel yet",
    "_upsample_backward": "no GPU kernel yet",
    "avg_pool1d": "no GPU kernel yet",
    "avg_pool2d": "no GPU kernel yet",
    "avg_pool3d": "no GPU kernel yet",
    "cdist": "no GPU kernel yet",
    "col2im": "no GPU kernel yet",
    "im2col": "no GPU kernel yet",
    "constant_pad_nd": "no GPU kernel yet",
    "grid_sampler": "no GPU kernel yet",
    "grid_sampler_2d_backward": "no GPU kernel yet",
    "max_pool1d_with_indices": "no GPU kernel yet",
    "max_pool3d_with_indices": "no GPU kernel yet",
    "native_group_norm": "no GPU kernel yet",
}
