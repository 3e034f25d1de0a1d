"""ember.sparse COO tensors against torch.sparse: construction, coalesce, to_dense, to_sparse,
sparse.mm / spmm with gradients, sparse.sum, errors; SparseAdam on sparse gradients."""
import numpy as np
import pytest
from harness import torch

import ember

IDX = [[0, 1, 1, 0, 2], [2, 0, 2, 2, 1]]
VAL = [3.0, 4.0, 5.0, 1.0, -2.0]


def _both(size=(3, 3)):
    return (ember.sparse_coo_tensor(IDX, VAL, size),
            torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(VAL), size))


def _np(x):
    return x.detach().numpy()


def test_coalesce_to_dense_and_metadata_match_torch():
    e, t = _both()
    assert e.is_sparse and not e.is_coalesced() and e._nnz() == t._nnz() == 5
    assert (e.sparse_dim(), e.dense_dim(), tuple(e.shape)) == (t.sparse_dim(), t.dense_dim(),
                                                               tuple(t.shape))
    ec, tc = e.coalesce(), t.coalesce()
    assert ec.indices().tolist() == tc.indices().tolist()
    np.testing.assert_allclose(_np(ec.values()), _np(tc.values()))
    np.testing.assert_allclose(_np(e.to_dense()), _np(t.to_dense()))
    with pytest.raises(RuntimeError, match="uncoalesced"):
        e.indices()
    d = np.array([[0.0, 2.0, 0.0], [3.0, 0.0, 0.0]])
    es, ts = ember.tensor(d).to_sparse(), torch.tensor(d).to_sparse()
    assert es.indices().tolist() == ts.indices().tolist()
    np.testing.assert_allclose(_np(es.values()), _np(ts.values()))
    np.testing.assert_allclose(_np(e.t().to_dense()), _np(t.t().to_dense()))
    np.testing.assert_allclose(_np((e * 2).to_dense()), _np((t * 2).to_dense()))
    np.testing.assert_allclose(_np((e + e).to_dense()), _np((t + t).to_dense()))


def test_hybrid_sparse_dense_dims():
    idx, vals = [[0, 2]], np.arange(6.0).reshape(2, 3)
    e = ember.sparse_coo_tensor(idx, ember.tensor(vals), (4, 3))
    t = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(vals), (4, 3))
    assert (e.sparse_dim(), e.dense_dim()) == (1, 1)
    np.testing.assert_allclose(_np(e.to_dense()), _np(t.to_dense()))


def test_sparse_mm_values_and_grads_match_torch():
    x = np.random.default_rng(0).normal(size=(3, 4))
    e = ember.sparse_coo_tensor(IDX, VAL, (3, 3), dtype=ember.float64).coalesce()
    e.requires_grad_()
    t = torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(VAL, dtype=torch.float64),
                                (3, 3)).coalesce()
    t.requires_grad_()
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    for f in (lambda m, a, b: m.sparse.mm(a, b), lambda m, a, b: m.spmm(a, b),
              lambda m, a, b: a @ b):
        ey, ty = f(ember, e, ex), f(torch, t, tx)
        np.testing.assert_allclose(_np(ey), _np(ty), rtol=1e-12)
    ey, ty = ember.sparse.mm(e, ex), torch.sparse.mm(t, tx)
    (ey ** 2).sum().backward()
    (ty ** 2).sum().backward()
    np.testing.assert_allclose(_np(ex.grad), _np(tx.grad), rtol=1e-12)
    np.testing.assert_allclose(_np(e.values().grad), _np(t.grad.coalesce().values()),
                               rtol=1e-12)
    with pytest.raises(RuntimeError, match="Expected dim 0 size 3"):
        ember.sparse.mm(e, ember.ones(2, 2))


def test_sparse_sum_matches_torch():
    e, t = _both()
    assert ember.sparse.sum(e).item() == torch.sparse.sum(t).item()
    for dim in (0, 1):
        es, ts = ember.sparse.sum(e, dim), torch.sparse.sum(t, dim)
        assert es.is_sparse and ts.is_sparse
        np.testing.assert_allclose(_np(es.to_dense()), _np(ts.to_dense()))
    np.testing.assert_allclose(_np(ember.sparse.sum(e, (0, 1))),
                               _np(torch.sparse.sum(t, (0, 1))))


def test_construction_errors_match_torch():
    for t in (ember, torch):
        with pytest.raises(RuntimeError, match="indices and values must have same nnz"):
            t.sparse_coo_tensor(t.tensor([[0, 1]]), t.tensor([1.0]), (2,))
        with pytest.raises(RuntimeError, match="size is inconsistent with indices"):
            t.sparse_coo_tensor(t.tensor([[0, 5]]), t.tensor([1.0, 2.0]), (3,),
                                check_invariants=True)
    assert tuple(ember.sparse_coo_tensor(IDX, VAL).shape) == \
        tuple(torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(VAL)).shape)


def test_sparse_adam_matches_torch():
    rng = np.random.default_rng(1)
    w0 = rng.normal(size=(6, 3))
    steps = [(rng.integers(0, 6, 4), rng.normal(size=(4, 3))) for _ in range(5)]
    out = []
    for t in (ember, torch):
        w = t.tensor(w0.copy(), requires_grad=True)
        opt = t.optim.SparseAdam([w], lr=0.1)
        for rows, g in steps:
            w.grad = t.sparse_coo_tensor(t.tensor(rows).reshape(1, -1), t.tensor(g), (6, 3))
            opt.step()
        out.append(_np(w))
    np.testing.assert_allclose(out[0], out[1], rtol=1e-10, atol=1e-12)


def test_csr_matches_torch():
    d = np.array([[0.0, 2.0, 0.0], [3.0, 0.0, 4.0], [0.0, 0.0, 0.0]])
    e, t = ember.tensor(d).to_sparse_csr(), torch.tensor(d).to_sparse_csr()
    assert e.is_sparse_csr and not e.is_sparse and str(e.layout) == "ember.sparse_csr"
    for f in ("crow_indices", "col_indices"):
        assert getattr(e, f)().tolist() == getattr(t, f)().tolist()
    np.testing.assert_allclose(_np(e.values()), _np(t.values()))
    np.testing.assert_allclose(_np(e.to_dense()), d)
    c = ember.sparse_csr_tensor([0, 1, 3, 3], [1, 0, 2], [2.0, 3.0, 4.0], (3, 3))
    tc = torch.sparse_csr_tensor(torch.tensor([0, 1, 3, 3]), torch.tensor([1, 0, 2]),
                                 torch.tensor([2.0, 3.0, 4.0]), (3, 3))
    np.testing.assert_allclose(_np(c.to_dense()), _np(tc.to_dense()))
    assert c.to_sparse().indices().tolist() == tc.to_sparse().indices().tolist()
    x = np.random.default_rng(2).normal(size=(3, 2)).astype("float32")
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ey, ty = ember.sparse.mm(c, ex), torch.sparse.mm(tc, tx)
    np.testing.assert_allclose(_np(ey), _np(ty), rtol=1e-6)
    np.testing.assert_allclose(_np(c @ ex), _np(tc @ tx), rtol=1e-6)
    ey.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(_np(ex.grad), _np(tx.grad), rtol=1e-6)
    coo = ember.sparse_coo_tensor(IDX, VAL, (3, 3)).to_sparse_csr()
    tcoo = torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(VAL), (3, 3)).to_sparse_csr()
    assert coo.crow_indices().tolist() == tcoo.crow_indices().tolist()
    np.testing.assert_allclose(_np(coo.values()), _np(tcoo.values()))
