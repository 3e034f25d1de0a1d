"""Sparse COO/CSR tensors as ember.Tensor against torch: layout and predicates, printing,
sparse-aware operators (sparse @ dense, dense @ sparse, sparse + sparse, sparse * scalar or
dense, zero-preserving pointwise, softmax), dense ops reading the dense form, gradients to the
values and the dense operand, and a GCN layer's training steps."""
import warnings

import numpy as np
import pytest
import torch

import ember

warnings.filterwarnings("ignore", message="Sparse")
IDX = [[0, 1, 1, 0, 2, 3], [2, 0, 2, 2, 1, 3]]
VAL = [3.0, 4.0, 5.0, 1.0, -2.0, 0.5]


def _sp(t, coalesce=False, dtype="float32", size=(4, 4)):
    s = t.sparse_coo_tensor(t.tensor(IDX), t.tensor(VAL, dtype=getattr(t, dtype)), size)
    return s.coalesce() if coalesce else s


def _np(x):
    x = x.detach()
    return (x.to_dense() if x.layout != x.layout.__class__ and x.is_sparse or
            x.layout is not _strided(x) else x).numpy()


def _strided(x):
    return ember.strided if isinstance(x, ember.Tensor) else torch.strided


def _same(e, t, rtol=1e-6):
    assert str(e.layout).split(".")[1] == str(t.layout).split(".")[1]
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(_np(e), _np(t), rtol=rtol, atol=1e-7)


def test_tensor_subclass_and_predicates():
    e, t = _sp(ember), _sp(torch)
    assert isinstance(e, ember.Tensor)
    assert (e.is_sparse, e.is_sparse_csr, e.layout is ember.sparse_coo) == (True, False, True)
    c = e.to_sparse_csr()
    assert (c.is_sparse, c.is_sparse_csr, c.layout is ember.sparse_csr) == (False, True, True)
    assert ember.ones(2).layout is ember.strided and not ember.ones(2).is_sparse
    assert (e.dtype, tuple(e.shape), e.dim(), e.numel()) == (ember.float32, (4, 4), 2, 16)
    assert e._nnz() == t._nnz() and e.sparse_dim() == t.sparse_dim()
    assert e.double().dtype == ember.float64 and e.double().layout is ember.sparse_coo
    assert e.type() == t.type().replace("torch", "ember")


def test_printing_matches_torch():
    cases = [lambda m: _sp(m), lambda m: _sp(m, True), lambda m: _sp(m, dtype="float64"),
             lambda m: _sp(m).to_sparse_csr(), lambda m: _sp(m, dtype="float64").to_sparse_csr(),
             lambda m: m.sparse_coo_tensor(m.tensor(IDX), m.ones(6, 2), (4, 4, 2)),
             lambda m: m.sparse_coo_tensor(m.zeros(2, 0, dtype=m.int64), m.zeros(0), (3, 3)),
             lambda m: _sp(m).requires_grad_(),
             lambda m: m.sparse_coo_tensor(m.tensor(IDX), m.tensor(VAL).long(), (4, 4))]
    for f in cases:
        assert repr(f(ember)) == repr(f(torch)).replace("torch.", "ember.")


def test_conversions_and_pieces():
    for coalesce in (False, True):
        e, t = _sp(ember, coalesce), _sp(torch, coalesce)
        _same(e.coalesce(), t.coalesce())
        assert e.coalesce().indices().tolist() == t.coalesce().indices().tolist()
        ec, tc = e.to_sparse_csr(), t.to_sparse_csr()
        assert ec.crow_indices().tolist() == tc.crow_indices().tolist()
        assert ec.col_indices().tolist() == tc.col_indices().tolist()
        np.testing.assert_allclose(ec.values().numpy(), tc.values().numpy())
        _same(ec.to_sparse(), tc.to_sparse())
    d = np.array([[0.0, 2.0, 0.0], [3.0, 0.0, 0.0]])
    _same(ember.tensor(d).to_sparse(), torch.tensor(d).to_sparse())
    _same(ember.tensor(d).to_sparse_csr(), torch.tensor(d).to_sparse_csr())
    assert ember.tensor(d).to_dense().tolist() == d.tolist()


OPS = {
    "mm": lambda m, s, d: m.mm(s, d),
    "matmul_op": lambda m, s, d: s @ d,
    "matmul_fn": lambda m, s, d: m.matmul(s, d),
    "sparse_mm": lambda m, s, d: m.sparse.mm(s, d),
    "csr_mm": lambda m, s, d: m.mm(s.to_sparse_csr(), d),
    "csr_matmul": lambda m, s, d: s.to_sparse_csr() @ d,
    "dense_at_sparse": lambda m, s, d: d.t() @ s,
    "mv": lambda m, s, d: s @ d[:, 0],
    "sparse_add": lambda m, s, d: s + s * 2,
    "sparse_sub": lambda m, s, d: s - s.coalesce(),
    "scalar_mul": lambda m, s, d: 3 * s,
    "scalar_div": lambda m, s, d: s / 2,
    "neg": lambda m, s, d: -s,
    "dense_mul": lambda m, s, d: s * (d @ d.t()),
    "dense_rmul": lambda m, s, d: (d @ d.t()) * s,
    "dense_plus_sparse": lambda m, s, d: (d @ d.t()) + s,
    "abs": lambda m, s, d: s.abs(),
    "sqrt_abs": lambda m, s, d: s.abs().sqrt(),
    "tanh": lambda m, s, d: s.tanh(),
    "pow": lambda m, s, d: s.pow(2),
    "sum": lambda m, s, d: s.sum(),
    "sparse_sum_dim": lambda m, s, d: m.sparse.sum(s, 1),
    "softmax": lambda m, s, d: m.sparse.softmax(s.coalesce(), 1),
    "log_softmax0": lambda m, s, d: m.sparse.log_softmax(s.coalesce(), 0),
    # no sparse rule: ember computes on the dense form (PyTorch refuses exp of a sparse tensor)
    "dense_op_on_sparse": lambda m, s, d: m.exp(s if m is ember else s.to_dense()),
    "t": lambda m, s, d: s.t(),
    "sparse_at_sparse": lambda m, s, d: s @ s,
    "addmm": lambda m, s, d: m.sparse.addmm(d, s, d),
}


# PyTorch has no backward for these on a sparse tensor: values only
FORWARD_ONLY = {"sqrt_abs", "tanh"}


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_values_and_grads(name):
    rng = np.random.default_rng(1)
    dn = rng.standard_normal((4, 4))
    res = []
    for m in (ember, torch):
        v = m.tensor(VAL, dtype=m.float64, requires_grad=True)
        s = m.sparse_coo_tensor(m.tensor(IDX), v * 1.0, (4, 4))
        d = m.tensor(dn, requires_grad=True)
        out = OPS[name](m, s, d)
        if name in FORWARD_ONLY:
            res.append((out, None, None))
            continue
        dense = out.to_dense() if out.layout != m.strided else out
        (dense * m.arange(dense.numel(), dtype=m.float64).reshape(dense.shape)).sum().backward()
        res.append((out, v.grad, d.grad))
    (e, ev, ed), (t, tv, td) = res
    _same(e, t, rtol=1e-10)
    for a, b in ((ev, tv), (ed, td)):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


def test_errors_match_torch():
    for f in (lambda m: _sp(m) + m.ones(4, 4), lambda m: m.sparse.mm(_sp(m), m.ones(3, 2)),
              lambda m: _sp(m) + m.sparse_coo_tensor([[0], [0]], [1.0], (5, 5)),
              lambda m: m.sparse.mm(_sp(m), m.ones(4, 2, dtype=m.float64)),
              lambda m: _sp(m).indices()):
        msgs = []
        for m in (ember, torch):
            with pytest.raises(RuntimeError) as ei:
                f(m)
            msgs.append(str(ei.value).split("\n")[0])
        assert msgs[0].split(":")[0] == msgs[1].split(":")[0] or msgs[0] == msgs[1], msgs


def test_leaf_sparse_grad_is_sparse():
    res = []
    for m in (ember, torch):
        s = m.sparse_coo_tensor(m.tensor(IDX), m.tensor(VAL), (4, 4), requires_grad=True)
        assert s.is_leaf and s.requires_grad
        (m.sparse.mm(s, m.ones(4, 2)) ** 2).sum().backward()
        assert s.grad.layout == m.sparse_coo
        res.append(s.grad.to_dense().numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-6)


def _gcn_steps(m, adj_idx, adj_val, x_np, w1, w2, y_np, steps=3):
    """Two-layer GCN (sparse normalized adjacency @ dense features) trained with Adam."""
    n = x_np.shape[0]
    adj = m.sparse_coo_tensor(m.tensor(adj_idx), m.tensor(adj_val), (n, n)).coalesce()
    lin1, lin2 = m.nn.Linear(w1.shape[1], w1.shape[0]), m.nn.Linear(w2.shape[1], w2.shape[0])
    with m.no_grad():
        lin1.weight.copy_(m.tensor(w1))
        lin1.bias.zero_()
        lin2.weight.copy_(m.tensor(w2))
        lin2.bias.zero_()
    params = list(lin1.parameters()) + list(lin2.parameters())
    opt = m.optim.Adam(params, lr=0.01)
    x, y = m.tensor(x_np), m.tensor(y_np)
    losses = []
    for _ in range(steps):
        h = m.relu(m.sparse.mm(adj, lin1(x)))
        out = adj @ lin2(h)
        loss = m.nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().numpy().copy() for p in params]


def test_gcn_training_steps_match_torch():
    rng = np.random.default_rng(0)
    n, f, hdim, c = 30, 8, 16, 3
    edges = rng.integers(0, n, size=(2, 90))
    edges = np.concatenate([edges, edges[::-1], np.tile(np.arange(n), (2, 1))], 1)
    deg = np.bincount(edges[0], minlength=n).astype(np.float32)
    val = (1 / np.sqrt(deg[edges[0]] * deg[edges[1]])).astype(np.float32)
    x = rng.standard_normal((n, f)).astype(np.float32)
    w1 = (rng.standard_normal((hdim, f)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((c, hdim)) * 0.3).astype(np.float32)
    y = rng.integers(0, c, n)
    le, pe = _gcn_steps(ember, edges.tolist(), val, x, w1, w2, y)
    lt, pt = _gcn_steps(torch, edges.tolist(), val, x, w1, w2, y)
    np.testing.assert_allclose(le, lt, rtol=1e-5)
    for a, b in zip(pe, pt):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
