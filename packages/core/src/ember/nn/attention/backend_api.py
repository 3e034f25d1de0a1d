"""FlexAttention's surface for device backends (ember.cuda's fused Triton kernels, third-party
devices): what a backend needs to inline a call's mods into its kernels and to run its kernel
pair as one autograd node. It imports these names, never `_modexpr` / `_fused` themselves, so
core may reorganize those (as `ember._ops.registry` is the op table's surface).

Mods as expressions (`_modexpr`):
- `trace(score_mod, mask_mod)` -> (score, d score / d qk, mask, captured tensors), raising
  `Unsupported` for a mod the fused kernels cannot inline (the caller runs the eager reference);
- `to_triton(expr)`: an expression as Triton source (`qk`, `b`, `h`, `q_idx`, `kv_idx`).

The kernel pair (`_fused`):
- `run(plan, query, key, value, return_lse)`: plan.forward, recorded for autograd (its backward
  is plan.backward) where an input needs gradients;
- `delta(out, lse, dout, dlse)`: rowsum(dout * out) - dlse, the backward kernels' statistic;
- `reduce_kv(d, like)`: a per-query-head gradient summed onto like's kv heads (GQA) and batch.
"""
from __future__ import annotations

from ._fused import delta, reduce_kv, run
from ._modexpr import Unsupported, to_triton, trace

__all__ = ["Unsupported", "trace", "to_triton", "run", "delta", "reduce_kv"]
