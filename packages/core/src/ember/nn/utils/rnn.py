"""Variable-length sequences for RNNs: PackedSequence, pack/pad helpers, pad_sequence.

A PackedSequence stores time-major data of sequences sorted by decreasing length:
`batch_sizes[t]` is how many sequences are still running at step t, and `data` holds their
step-t elements one step after another.
"""
from __future__ import annotations

from collections import namedtuple

from ..._tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]

_PackedSequenceBase = namedtuple("PackedSequence_",
                                 ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    if permutation is None:
        return None
    from ... import argsort
    return argsort(permutation)


class PackedSequence(_PackedSequenceBase):
    """Holds the data and batch_sizes of a packed sequence (make one with
    pack_padded_sequence or pack_sequence)."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        elif batch_sizes.device.type != "cpu":
            raise ValueError("batch_sizes should always be on CPU. Instances of PackedSequence "
                             "should never be created manually. They should be instantiated by "
                             "functions like pack_sequence and pack_padded_sequences in "
                             "nn.utils.rnn.")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> PackedSequence:
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self

        def move(t):
            return None if t is None else t.to(data.device)
        return type(self)(data, self.batch_sizes, move(self.sorted_indices),
                          move(self.unsorted_indices))

    def cuda(self, *args, **kwargs):
        return self.to("cuda")

    def cpu(self, *args, **kwargs):
        return self.to("cpu")

    def double(self):
        from ... import float64
        return self.to(dtype=float64)

    def float(self):
        from ... import float32
        return self.to(dtype=float32)

    def half(self):
        from ... import float16
        return self.to(dtype=float16)

    def long(self):
        from ... import int64
        return self.to(dtype=int64)

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda


def _lengths_list(lengths) -> list:
    if isinstance(lengths, Tensor):
        return [int(v) for v in lengths.tolist()]
    return [int(v) for v in lengths]


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (T, B, *) (or (B, T, *)) of sequences of the given lengths."""
    from ... import cat, int64, tensor
    lens = _lengths_list(lengths)
    sorted_indices = None
    if not enforce_sorted:
        order = sorted(range(len(lens)), key=lambda i: -lens[i])  # stable, like PyTorch's sort
        sorted_indices = tensor(order, dtype=int64, device=input.device)
        lens = [lens[i] for i in order]
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    if any(n <= 0 for n in lens):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element "
                           "in 'lengths' that is <= 0")
    if any(a < b for a, b in zip(lens, lens[1:])):
        raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                           "`enforce_sorted` is True. You can pass `enforce_sorted=False` to "
                           "pack_padded_sequence and/or pack_sequence to sidestep this "
                           "requirement if you do not need ONNX exportability.")
    if batch_first:
        input = input.transpose(0, 1)
    if lens[0] > input.shape[0]:
        raise RuntimeError(f"Expected sequence length to be larger than or equal to the largest "
                           f"length ({lens[0]}), but got {input.shape[0]}")
    batch_sizes = [sum(1 for n in lens if n > t) for t in range(lens[0])]
    data = cat([input[t, :b] for t, b in enumerate(batch_sizes)])
    return PackedSequence(data, tensor(batch_sizes, dtype=int64), sorted_indices, None)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length: int | None = None):
    """Inverse of pack_padded_sequence: (padded tensor, lengths)."""
    from ... import cat, full, int64, stack, tensor
    batch_sizes = _lengths_list(sequence.batch_sizes)
    max_len = len(batch_sizes)
    if total_length is not None:
        if total_length < max_len:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {max_len}")
        max_len = total_length
    data = sequence.data
    batch = batch_sizes[0]
    rest = tuple(data.shape[1:])
    steps, offset = [], 0
    for b in batch_sizes:
        step = data[offset:offset + b]
        offset += b
        if b < batch:
            step = cat([step, full((batch - b, *rest), padding_value, dtype=data.dtype,
                                   device=data.device)])
        steps.append(step)
    for _ in range(max_len - len(batch_sizes)):
        steps.append(full((batch, *rest), padding_value, dtype=data.dtype, device=data.device))
    padded = stack(steps)  # (T, B, *)
    if batch_first:
        padded = padded.transpose(0, 1)
    lengths = [sum(1 for b in batch_sizes if b > i) for i in range(batch)]
    lengths = tensor(lengths, dtype=int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices.cpu()]
    return padded, lengths


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack tensors of shape (L_i, *) into (L_max, B, *) (or (B, L_max, *)), padded."""
    from ... import cat, full, stack
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got "
                         f"{padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    max_len = max(s.size(0) for s in sequences)
    padded = []
    for s in sequences:
        n = max_len - s.size(0)
        if n:
            pad = full((n, *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, pad]) if padding_side == "right" else cat([pad, s])
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:n] for seq, n in zip(padded_sequences, _lengths_list(lengths))]


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    lengths = [v.size(0) for v in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths,
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
