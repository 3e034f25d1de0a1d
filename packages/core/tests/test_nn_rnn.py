"""Recurrent layers, packed sequences, MultiheadAttention and Transformer layers vs torch."""
from __future__ import annotations

import numpy as np
import pytest
from harness import compare
from test_nn_layers import run

import ember

torch = pytest.importorskip("torch")


def first(o):
    return o[0]


RNNS = {
    "RNN": (lambda t: t.nn.RNN(3, 4), [(5, 2, 3)]),
    "RNN-relu-2layer-bi": (lambda t: t.nn.RNN(3, 4, 2, nonlinearity="relu",
                                              bidirectional=True), [(4, 2, 3)]),
    "RNN-h0-unbatched": (lambda t: t.nn.RNN(3, 4, batch_first=True), [(5, 3), (1, 4)]),
    "LSTM": (lambda t: t.nn.LSTM(3, 4), [(5, 2, 3)]),
    "LSTM-batch-first-bi-2": (lambda t: t.nn.LSTM(3, 4, num_layers=2, batch_first=True,
                                                  bidirectional=True), [(2, 5, 3)]),
    "LSTM-proj-nobias": (lambda t: t.nn.LSTM(3, 4, bias=False, proj_size=2), [(4, 2, 3)]),
    "GRU": (lambda t: t.nn.GRU(3, 4, num_layers=2), [(5, 2, 3), (2, 2, 4)]),
    "GRU-bi-unbatched": (lambda t: t.nn.GRU(3, 4, bidirectional=True), [(5, 3)]),
}


def flat(o):
    """(output, h) or (output, (h, c)) -> a flat tuple of tensors."""
    out, h = o
    return (out, *h) if isinstance(h, tuple) else (out, h)


@pytest.mark.parametrize("name", sorted(RNNS))
def test_rnn(name):
    ctor, shapes = RNNS[name]
    run(ctor, shapes, out=flat)


def test_lstm_with_initial_state():
    def f(t, x, h, c):
        torch.manual_seed(0)
        return t.nn.LSTM(3, 4, 2)

    rng = np.random.default_rng(0)
    x, h, c = rng.standard_normal((5, 2, 3)), rng.standard_normal((2, 2, 4)), \
        rng.standard_normal((2, 2, 4))
    tm, em = torch.nn.LSTM(3, 4, 2).double(), ember.nn.LSTM(3, 4, 2).double()
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    to = tm(torch.tensor(x), (torch.tensor(h), torch.tensor(c)))
    eo = em(ember.tensor(x), (ember.tensor(h), ember.tensor(c)))
    compare(flat(eo), flat(to))


CELLS = {
    "RNNCell": (lambda t: t.nn.RNNCell(3, 4), [(2, 3), (2, 4)]),
    "RNNCell-relu-nohx": (lambda t: t.nn.RNNCell(3, 4, nonlinearity="relu"), [(2, 3)]),
    "RNNCell-unbatched": (lambda t: t.nn.RNNCell(3, 4, bias=False), [(3,), (4,)]),
    "LSTMCell": (lambda t: t.nn.LSTMCell(3, 4), [(2, 3)]),
    "GRUCell": (lambda t: t.nn.GRUCell(3, 4), [(2, 3), (2, 4)]),
    "GRUCell-unbatched": (lambda t: t.nn.GRUCell(3, 4), [(3,)]),
}


@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell(name):
    ctor, shapes = CELLS[name]
    run(ctor, shapes)


def test_lstm_cell_with_state():
    tm, em = torch.nn.LSTMCell(3, 4).double(), ember.nn.LSTMCell(3, 4).double()
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(1)
    x, h, c = rng.standard_normal((2, 3)), rng.standard_normal((2, 4)), \
        rng.standard_normal((2, 4))
    compare(em(ember.tensor(x), (ember.tensor(h), ember.tensor(c))),
            tm(torch.tensor(x), (torch.tensor(h), torch.tensor(c))))


def test_rnn_state_dict_names_match_torch():
    for ctor in (lambda t: t.nn.LSTM(2, 3, num_layers=2, bidirectional=True, proj_size=1),
                 lambda t: t.nn.GRU(2, 3, bias=False), lambda t: t.nn.RNN(2, 3, 3)):
        assert list(ctor(ember).state_dict()) == list(ctor(torch).state_dict())


def test_rnn_input_errors_match_torch():
    for f in (lambda t: t.nn.LSTM(3, 4)(t.ones(2, 2, 2)),
              lambda t: t.nn.GRU(3, 4)(t.ones(1, 2, 2, 3)),
              lambda t: t.nn.RNN(3, 4)(t.ones(2, 2, 3), t.zeros(1, 3, 4)),
              lambda t: t.nn.LSTM(3, 4)(t.ones(2, 2, 3), (t.zeros(1, 2, 4), t.zeros(1, 2, 5))),
              lambda t: t.nn.RNN(3, 4)(t.ones(2, 3), t.zeros(1, 1, 4)),
              lambda t: t.nn.GRUCell(3, 4)(t.ones(2, 2, 3))):
        with pytest.raises(Exception) as te:
            f(torch)
        with pytest.raises(Exception) as ee:
            f(ember)
        assert type(ee.value) is type(te.value)
        assert str(ee.value) == str(te.value)


@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_packed_sequence_through_rnn(mode, enforce_sorted):
    lengths = [5, 3, 3, 1] if enforce_sorted else [3, 5, 1, 3]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4, 2))
    tm = getattr(torch.nn, mode)(2, 3, num_layers=2, bidirectional=True).double()
    em = getattr(ember.nn, mode)(2, 3, num_layers=2, bidirectional=True).double()
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    tp = torch.nn.utils.rnn.pack_padded_sequence(tx, lengths, enforce_sorted=enforce_sorted)
    ep = ember.nn.utils.rnn.pack_padded_sequence(ex, lengths, enforce_sorted=enforce_sorted)
    compare(ep.data, tp.data)
    compare(ep.batch_sizes, tp.batch_sizes)
    tout, th = tm(tp)
    eout, eh = em(ep)
    compare(eout.data, tout.data)
    compare(eh, th)
    tpad, tlen = torch.nn.utils.rnn.pad_packed_sequence(tout, batch_first=True, total_length=6)
    epad, elen = ember.nn.utils.rnn.pad_packed_sequence(eout, batch_first=True, total_length=6)
    compare(epad, tpad)
    compare(elen, tlen)
    w = rng.standard_normal(tuple(tpad.shape))
    (tpad * torch.tensor(w)).sum().backward()
    (epad * ember.tensor(w)).sum().backward()
    compare(ex.grad, tx.grad)


def test_pad_sequence_and_pack_sequence():
    seqs = [np.arange(n * 2, dtype="float32").reshape(n, 2) for n in (2, 4, 1)]
    for kw in ({}, {"batch_first": True, "padding_value": -1.0},
               {"padding_side": "left", "batch_first": True}):
        compare(ember.nn.utils.rnn.pad_sequence([ember.tensor(s) for s in seqs], **kw),
                torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], **kw))
    ep = ember.nn.utils.rnn.pack_sequence([ember.tensor(s) for s in seqs], enforce_sorted=False)
    tp = torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    compare(ep.data, tp.data)
    compare(ep.sorted_indices, tp.sorted_indices)
    compare(ep.unsorted_indices, tp.unsorted_indices)
    compare(ember.nn.utils.rnn.unpack_sequence(ep), torch.nn.utils.rnn.unpack_sequence(tp))
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        ember.nn.utils.rnn.pack_sequence([ember.tensor(s) for s in seqs])
    with pytest.raises(ValueError, match="padding_side"):
        ember.nn.utils.rnn.pad_sequence([ember.ones(1)], padding_side="middle")


# ---- attention -----------------------------------------------------------------------------------
def mha_out(o):
    return o if o[1] is not None else o[0]


MHAS = {
    "self": (lambda t: t.nn.MultiheadAttention(8, 2), [(5, 2, 8)] * 3),
    "batch-first-kv": (lambda t: t.nn.MultiheadAttention(8, 4, batch_first=True, kdim=3,
                                                         vdim=5), [(2, 4, 8), (2, 6, 3),
                                                                   (2, 6, 5)]),
    "bias-kv-zero-attn": (lambda t: t.nn.MultiheadAttention(4, 2, add_bias_kv=True,
                                                            add_zero_attn=True, bias=False),
                          [(3, 2, 4), (5, 2, 4), (5, 2, 4)]),
    "unbatched": (lambda t: t.nn.MultiheadAttention(4, 1), [(3, 4), (5, 4), (5, 4)]),
}


@pytest.mark.parametrize("name", sorted(MHAS))
def test_multihead_attention(name):
    ctor, shapes = MHAS[name]
    run(ctor, shapes, out=mha_out)


def test_multihead_attention_masks_and_options():
    tm, em = torch.nn.MultiheadAttention(4, 2).double(), ember.nn.MultiheadAttention(4, 2)
    em.double().load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((3, 2, 4)), rng.standard_normal((5, 2, 4))
    kpm = np.array([[False, False, True, False, True], [False] * 5])
    am = rng.standard_normal((3, 5))
    for kw in ({"key_padding_mask": kpm}, {"attn_mask": am, "average_attn_weights": False},
               {"attn_mask": am > 1, "key_padding_mask": kpm}, {"need_weights": False}):
        tkw = {n: torch.tensor(v) for n, v in kw.items() if isinstance(v, np.ndarray)}
        ekw = {n: ember.tensor(v) for n, v in kw.items() if isinstance(v, np.ndarray)}
        rest = {n: v for n, v in kw.items() if not isinstance(v, np.ndarray)}
        to = tm(torch.tensor(q), torch.tensor(k), torch.tensor(k), **tkw, **rest)
        eo = em(ember.tensor(q), ember.tensor(k), ember.tensor(k), **ekw, **rest)
        compare(mha_out(eo), mha_out(to))


TRANSFORMERS = {
    "encoder-layer": (lambda t: t.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0),
                      [(4, 2, 8)]),
    "encoder-layer-normfirst-gelu": (
        lambda t: t.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu",
                                               norm_first=True, batch_first=True), [(2, 4, 8)]),
    "decoder-layer": (lambda t: t.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0),
                      [(3, 2, 8), (4, 2, 8)]),
    "encoder": (lambda t: t.nn.TransformerEncoder(
        t.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2, enable_nested_tensor=False),
        [(4, 2, 8)]),
    "transformer": (lambda t: t.nn.Transformer(8, 2, 1, 1, 16, dropout=0.0),
                    [(4, 2, 8), (3, 2, 8)]),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMERS))
def test_transformer(name):
    ctor, shapes = TRANSFORMERS[name]
    run(ctor, shapes, rtol=1e-6, atol=1e-7)


def test_transformer_causal_mask():
    compare(ember.nn.Transformer.generate_square_subsequent_mask(3),
            torch.nn.Transformer.generate_square_subsequent_mask(3))
    tm = torch.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0).double()
    em = ember.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0).double()
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((3, 2, 4))
    mask = np.triu(np.ones((3, 3), bool), 1)
    compare(em(ember.tensor(x), src_mask=ember.tensor(mask)),
            tm(torch.tensor(x), src_mask=torch.tensor(mask)))
