"""Recurrent layers: RNN, LSTM, GRU and their cells, with PyTorch's parameter names
(weight_ih_l0, weight_hh_l0_reverse, ...), gate order (LSTM i,f,g,o; GRU r,z,n) and init.

The recurrence is written here in ember ops (F.linear, sigmoid, tanh) one time step at a time;
it handles padded and packed (variable-length) input alike as a list of per-step batches.
"""
from __future__ import annotations

import math
import numbers
import warnings

from ... import empty, zeros
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


# ---- one time step: state is a tuple (h,) or (h, c); returns the new state -------------------
def _rnn_tanh_cell(x, state, w_ih, w_hh, b_ih=None, b_hh=None, w_hr=None):
    return ((F.linear(x, w_ih, b_ih) + F.linear(state[0], w_hh, b_hh)).tanh(),)


def _rnn_relu_cell(x, state, w_ih, w_hh, b_ih=None, b_hh=None, w_hr=None):
    return (F.relu(F.linear(x, w_ih, b_ih) + F.linear(state[0], w_hh, b_hh)),)


def _lstm_cell(x, state, w_ih, w_hh, b_ih=None, b_hh=None, w_hr=None):
    h, c = state
    gates = F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh)  # (B, 4H): i, f, g, o
    i, f, g, o = gates.chunk(4, 1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    if w_hr is not None:
        h = F.linear(h, w_hr)  # LSTM with projections: h is (B, proj_size)
    return (h, c)


def _gru_cell(x, state, w_ih, w_hh, b_ih=None, b_hh=None, w_hr=None):
    h = state[0]
    i_r, i_z, i_n = F.linear(x, w_ih, b_ih).chunk(3, 1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, 1)
    r = (i_r + h_r).sigmoid()
    z = (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()  # r gates the hidden part only, as in PyTorch (and cuDNN)
    return ((1 - z) * n + z * h,)


_CELLS = {"RNN_TANH": _rnn_tanh_cell, "RNN_RELU": _rnn_relu_cell, "LSTM": _lstm_cell,
          "GRU": _gru_cell}
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _run_direction(cell, steps, batch_sizes, state, weights, reverse):
    """Run one direction over steps[t] (batch_sizes[t] rows, non-increasing); returns the
    per-step outputs and the final state of every sequence (full batch)."""
    from ... import cat
    T = len(steps)
    outs = [None] * T
    if not reverse:
        finished = []  # states of sequences that ended early, highest indices first
        for t in range(T):
            b = batch_sizes[t]
            cur = state[0].shape[0]
            if b < cur:
                finished.append(tuple(s[b:cur] for s in state))
                state = tuple(s[:b] for s in state)
            state = cell(steps[t], state, *weights)
            outs[t] = state[0]
        final = tuple(cat([s, *[f[k] for f in reversed(finished)]]) if finished else s
                      for k, s in enumerate(state))
        return outs, final
    full = state
    state = tuple(s[:batch_sizes[T - 1]] for s in full)
    for t in range(T - 1, -1, -1):
        b = batch_sizes[t]
        cur = state[0].shape[0]
        if b > cur:  # longer sequences join, starting from their initial state
            state = tuple(cat([s, f[cur:b]]) for s, f in zip(state, full))
        state = cell(steps[t], state, *weights)
        outs[t] = state[0]
    return outs, state


class RNNBase(Module):
    """Parameters and the multi-layer, bidirectional loop shared by RNN, LSTM and GRU."""

    __constants__ = ["mode", "input_size", "hidden_size", "num_layers", "bias", "batch_first",
                     "dropout", "bidirectional", "proj_size"]

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or \
                isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        for name, value, typ in (("bias", bias, bool), ("batch_first", batch_first, bool),
                                 ("input_size", input_size, int),
                                 ("hidden_size", hidden_size, int)):
            if not isinstance(value, typ):
                raise TypeError(f"{name} should be of type {typ.__name__}, got: "
                                f"{type(value).__name__}")
            if typ is int and value <= 0:
                raise ValueError(f"{name} must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size = _GATES[mode] * hidden_size
        fk = dict(device=device, dtype=dtype)
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden * num_directions
                sfx = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                params = [("weight_ih" + sfx, (gate_size, layer_input)),
                          ("weight_hh" + sfx, (gate_size, real_hidden))]
                if bias:
                    params += [("bias_ih" + sfx, (gate_size,)), ("bias_hh" + sfx, (gate_size,))]
                if proj_size > 0:
                    params += [("weight_hr" + sfx, (proj_size, hidden_size))]
                for name, shape in params:
                    setattr(self, name, Parameter(empty(shape, **fk)))
                names = [n for n, _ in params]
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, w) for w in ws] for ws in self._all_weights]

    def flatten_parameters(self) -> None:
        pass  # a cuDNN layout optimization; nothing to do without cuDNN

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ---- argument checks (PyTorch's messages) ----------------------------------------------------
    def check_input(self, input, batch_sizes) -> None:
        w = self._flat_weights[0]
        if input.dtype != w.dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype "
                             f"({w.dtype}). Convert input: input.to({w.dtype}), or convert "
                             f"model: model.to({input.dtype})")
        expected = 2 if batch_sizes is not None else 3
        if input.dim() != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.size(-1)}")

    def _hidden_shape(self, batch, size):
        return (self.num_layers * (2 if self.bidirectional else 1), batch, size)

    def check_hidden_size(self, hx, expected, msg="Expected hidden size {}, got {}") -> None:
        if tuple(hx.size()) != tuple(expected):
            raise RuntimeError(msg.format(tuple(expected), list(hx.size())))

    # ---- the recurrence --------------------------------------------------------------------------
    def _run(self, steps, batch_sizes, hx):
        """steps: per-time-step inputs; hx: tuple of (layers*dirs, B, *) initial states.
        Returns (per-step outputs, tuple of final states stacked like hx)."""
        from ... import cat, stack
        cell = _CELLS[self.mode]
        dirs = 2 if self.bidirectional else 1
        finals = [[] for _ in hx]
        for layer in range(self.num_layers):
            dir_outs = []
            for d in range(dirs):
                k = layer * dirs + d
                weights = [getattr(self, n) for n in self._all_weights[k]]
                if not self.bias:  # cells take (w_ih, w_hh, b_ih, b_hh, w_hr)
                    weights = weights[:2] + [None, None] + weights[2:]
                state = tuple(h[k] for h in hx)
                outs, final = _run_direction(cell, steps, batch_sizes, state, weights, d == 1)
                dir_outs.append(outs)
                for j, f in enumerate(final):
                    finals[j].append(f)
            steps = [cat(o, -1) if dirs == 2 else o[0] for o in zip(*dir_outs)]
            if self.dropout and self.training and layer < self.num_layers - 1:
                steps = [F.dropout(s, self.dropout, True) for s in steps]
        return steps, tuple(stack(f) for f in finals)

    def _forward(self, input, hx):
        """Shared body of RNN/LSTM/GRU.forward; hx is None, a tensor, or (h, c) for LSTM."""
        from ... import cat, stack
        lstm = self.mode == "LSTM"
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        name = {"LSTM": "LSTM", "GRU": "GRU"}.get(self.mode, "RNN")
        packed = isinstance(input, PackedSequence)
        if packed:
            data, bs_tensor, sorted_indices, unsorted_indices = input
            batch_sizes = [int(b) for b in bs_tensor.tolist()]
            batch, is_batched = batch_sizes[0], True
        else:
            if input.dim() not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                                 + ("tensor instead" if name == "RNN" else "instead"))
            is_batched = input.dim() == 3
            batch_dim = 0 if self.batch_first else 1
            if not is_batched:
                input = input.unsqueeze(batch_dim)
            batch = input.size(0) if self.batch_first else input.size(1)
            sorted_indices = unsorted_indices = None
        if hx is None:
            dt = (data if packed else input)
            h = zeros(self._hidden_shape(batch, real_hidden), dtype=dt.dtype, device=dt.device)
            hx = (h, zeros(self._hidden_shape(batch, self.hidden_size), dtype=dt.dtype,
                           device=dt.device)) if lstm else (h,)
        else:
            hx = tuple(hx) if lstm else (hx,)
            want = 3 if is_batched else 2
            if any(h.dim() != want for h in hx):
                if lstm:
                    dims = ", ".join(f"{h.dim()}-D" for h in hx)
                    raise RuntimeError(
                        f"For {'batched 3-D' if is_batched else 'unbatched 2-D'} input, hx and "
                        f"cx should also be {want}-D but got ({dims}) tensors")
                raise RuntimeError(
                    f"For {'batched 3-D' if is_batched else 'unbatched 2-D'} input, hx should "
                    f"also be {want}-D but got {hx[0].dim()}-D tensor")
            if not is_batched:
                hx = tuple(h.unsqueeze(1) for h in hx)
            if sorted_indices is not None:
                hx = tuple(h.index_select(1, sorted_indices) for h in hx)
        self.check_input(data if packed else input, batch_sizes if packed else None)
        sizes = [real_hidden, self.hidden_size]
        for j, h in enumerate(hx):
            msg = f"Expected hidden[{j}] size {{}}, got {{}}" if lstm else \
                "Expected hidden size {}, got {}"
            self.check_hidden_size(h, self._hidden_shape(batch, sizes[j]), msg)
        if packed:
            steps = list(data.split(batch_sizes))
        else:
            seq = input.transpose(0, 1) if self.batch_first else input  # (T, B, in)
            steps = list(seq.unbind(0))
            batch_sizes = [batch] * len(steps)
        outs, hidden = self._run(steps, batch_sizes, hx)
        if unsorted_indices is not None:
            hidden = tuple(h.index_select(1, unsorted_indices) for h in hidden)
        if packed:
            output = PackedSequence(cat(outs), bs_tensor, sorted_indices, unsorted_indices)
        else:
            output = stack(outs, 1 if self.batch_first else 0)
            if not is_batched:
                output = output.squeeze(batch_dim)
                hidden = tuple(h.squeeze(1) for h in hidden)
        return output, (hidden if lstm else hidden[0])


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' "
                             "or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward(input, hx)


class LSTM(RNNBase):
    """LSTM; returns (output, (h_n, c_n)). Gates in weight order i, f, g, o."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward(input, hx)


class GRU(RNNBase):
    """GRU; gates in weight order r, z, n."""

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward(input, hx)


class RNNCellBase(Module):
    __constants__ = ["input_size", "hidden_size", "bias"]

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None) -> None:
        super().__init__()
        fk = dict(device=device, dtype=dtype)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), **fk))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), **fk))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, **fk))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, **fk))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += f", bias={self.bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _step(self, cell, name, input, hx, n_state):
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D "
                             "instead")
        for h in hx or ():
            if h is not None and h.dim() not in (1, 2):
                what = "hx[0], hx[1]" if n_state == 2 else "hidden"
                raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got {h.dim()}D "
                                 "instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            z = zeros(input.size(0), self.hidden_size, dtype=input.dtype, device=input.device)
            hx = (z,) * n_state
        elif not is_batched:
            hx = tuple(h.unsqueeze(0) for h in hx)
        out = cell(input, tuple(hx), self.weight_ih, self.weight_hh, self.bias_ih,
                   self.bias_hh)
        if not is_batched:
            out = tuple(o.squeeze(0) for o in out)
        return out


class RNNCell(RNNCellBase):
    __constants__ = ["input_size", "hidden_size", "bias", "nonlinearity"]

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device,
                         dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if self.nonlinearity == "tanh":
            cell = _rnn_tanh_cell
        elif self.nonlinearity == "relu":
            cell = _rnn_relu_cell
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return self._step(cell, "RNNCell", input, None if hx is None else (hx,), 1)[0]


class LSTMCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device,
                         dtype=dtype)

    def forward(self, input, hx=None):
        return self._step(_lstm_cell, "LSTMCell", input, hx, 2)


class GRUCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device,
                         dtype=dtype)

    def forward(self, input, hx=None):
        return self._step(_gru_cell, "GRUCell", input, None if hx is None else (hx,), 1)[0]
