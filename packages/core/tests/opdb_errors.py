"""The op database's error records: calls PyTorch rejects for their ranks, shapes, dtypes or
argument values (not for their tensors' values), one short record each, as opdb.py's records.

test_meta_errors.py checks that torch and ember's CPU kernel raise the same exception type for
each, and that ember's meta device raises it too (meta validates; kernels only compute).
"""
from __future__ import annotations

from opdb import R


def _r(name, sample, id, **kw):  # noqa: A002
    return R(name, sample, id=id, grad=False, **kw)


ERRORS = [
    # ---- gather / scatter along a dim -----------------------------------------------------------
    _r("gather", lambda s: (s.randn(3, 4), 1, s.int(2, hi=3)), "gather-rank"),
    _r("gather", lambda s: (s.randn(3, 4), 1, s.int(4, 2, hi=3)), "gather-size"),
    _r("scatter", lambda s: (s.randn(3, 4), 0, s.int(2, 4, hi=3), s.int(2, 4)),
       "scatter-src-dtype"),
    _r("scatter", lambda s: (s.randn(3, 4), 0, s.int(2, 4, hi=3), s.randn(1, 4)),
       "scatter-src-size"),
    _r("scatter", lambda s: (s.randn(3, 4), 0, s.int(4, hi=3), s.randn(3, 4)), "scatter-rank"),
    _r("scatter_add", lambda s: (s.randn(3, 4), 0, s.int(2, 5, hi=3), s.randn(2, 5)),
       "scatter_add-size"),
    _r("scatter_reduce.two", lambda s: (s.randn(3, 4), 0, s.int(2, 4, hi=3), s.randn(2, 4),
                                        "median"), "scatter_reduce-kind"),
    # ---- index_select / index_add / index_copy / index_fill -------------------------------------
    _r("index_select", lambda s: (s.randn(3, 4), 0, s.int(2, 2, hi=3)), "index_select-2d"),
    _r("index_add", lambda s: (s.randn(3, 4), 0, s.int(2, hi=3), s.randn(3, 4)),
       "index_add-count"),
    _r("index_add", lambda s: (s.randn(3, 4), 0, s.int(3, hi=3), s.int(3, 4)),
       "index_add-dtype"),
    _r("index_copy", lambda s: (s.randn(3, 4), 0, s.int(2, hi=3), s.randn(3, 4)),
       "index_copy-count"),
    # ---- take / put / x[indices] / index_put ----------------------------------------------------
    _r("put", lambda s: (s.randn(3, 4), s.int(3, hi=12), s.randn(2)), "put-count"),
    _r("index.Tensor", lambda s: (s.randn(3, 4), [s.int(2), s.int(2), s.int(2)]),
       "index-too-many"),
    _r("index.Tensor", lambda s: (s.randn(3, 4), [s.bool(2)]), "index-mask-shape"),
    _r("index.Tensor", lambda s: (s.randn(3, 4), [s.int(2, hi=3), s.int(3, hi=3)]),
       "index-broadcast"),
    _r("index_put", lambda s: (s.randn(3, 4), [s.int(2, hi=3)], s.randn(3, 4)),
       "index_put-shape"),
    _r("index_put", lambda s: (s.randn(3, 4), [s.int(2, hi=3)], s.int(2, 4)),
       "index_put-dtype"),
    # ---- nn -------------------------------------------------------------------------------------
    _r("nll_loss_forward", lambda s: (s.randn(3, 5), s.int(3, hi=5), s.randn(4), 1, -100),
       "nll_loss-weight"),
    _r("embedding", lambda s: (s.randn(5, 3), s.randn(4)), "embedding-float-index"),
    # ---- random: argument checks (the in-place samplers, bernoulli's p, normal's std) ----------
    _r("uniform_", lambda s: (s.randn(3), 2.0, 1.0), "uniform_-range"),
    _r("normal_", lambda s: (s.randn(3), 0.0, -1.0), "normal_-std"),
    _r("exponential_", lambda s: (s.randn(3), -1.0), "exponential_-lambda"),
    _r("exponential_", lambda s: (s.int(3), 1.0), "exponential_-int"),
    _r("geometric_", lambda s: (s.randn(3), 1.5), "geometric_-p"),
    _r("cauchy_", lambda s: (s.randn(3), 0.0, -1.0), "cauchy_-sigma"),
    _r("log_normal_", lambda s: (s.randn(3), 1.0, 0.0), "log_normal_-std"),
    _r("bernoulli.p", lambda s: (s.randn(3), 1.5), "bernoulli-p"),
    _r("bernoulli_.float", lambda s: (s.randn(3), -0.5), "bernoulli_-p"),
    _r("normal.Tensor_float", lambda s: (s.randn(3), -2.0), "normal-std"),
    _r("normal.float_float", lambda s: (0.0, -2.0, [3]), "normal-float-std"),
    # ---- masks, search, histc, *_scatter views ---------------------------------------------------
    _r("masked_scatter", lambda s: (s.randn(3, 4), s.bool(3, 4), s.int(12)),
       "masked_scatter-source-dtype"),
    _r("searchsorted.Tensor", lambda s: (s.randn(2, 5), s.randn(3, 4)),
       "searchsorted-leading-dims"),
    _r("bucketize.Tensor", lambda s: (s.randn(4), s.randn(2, 3)), "bucketize-boundaries-2d"),
    _r("histc", lambda s: (s.randn(10), 10, 2.0, 1.0), "histc-range"),
    _r("select_scatter", lambda s: (s.randn(3, 4), s.randn(3), 1, 6), "select_scatter-index"),
    # ---- sorting --------------------------------------------------------------------------------
    _r("mode", lambda s: (s.randn(3, 0), 1), "mode-empty-dim"),
    _r("kthvalue", lambda s: (s.randn(3, 4), 5, 1), "kthvalue-k"),
    _r("median.dim", lambda s: (s.randn(3, 0), 1), "median-empty-dim"),
    _r("nanmedian.dim", lambda s: (s.randn(3, 0), 1), "nanmedian-empty-dim"),
    # ---- reductions -----------------------------------------------------------------------------
    _r("max.dim", lambda s: (s.randn(3, 0), 1), "max-empty-dim"),
    _r("min.dim", lambda s: (s.randn(3, 0), 1), "min-empty-dim"),
    _r("max", lambda s: (s.randn(0, 3),), "max-empty"),
    # ---- others ---------------------------------------------------------------------------------
    _r("histc", lambda s: (s.randn(10), 0, 0.0, 1.0), "histc-bins"),
    _r("linalg_solve_triangular", lambda s: (s.randn(3), s.randn(3, 2)),
       "solve_triangular-rank", kw={"upper": True}),
    _r("linalg_solve_triangular", lambda s: (s.randn(3, 3), s.randn(4, 2)),
       "solve_triangular-shapes", kw={"upper": True}),
    _r("linalg_solve_triangular", lambda s: (s.randn(3, 3), s.randn(3)),
       "solve_triangular-b-rank", kw={"upper": True}),
    _r("linalg_solve_triangular", lambda s: (s.randn(3, 3), s.randn(2, 4)),
       "solve_triangular-right", kw={"upper": True, "left": False}),
]
