"""run_decompositions functionalizes in-place writes through views of a buffer (select, slice,
transpose): the graph has no in-place op, returns the buffer's new value as a BUFFER_MUTATION
output, and running it equals eager and torch.export's decomposed program."""
import numpy as np
import torch as _torch

import ember


def _module(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", lib.zeros(3, 4))

        def forward(self, x):
            self.buf[1].add_(x.sum(0)[:4])
            self.buf.t()[0].mul_(2)
            self.buf[:, 2:].sub_(1)
            return self.buf * 1 + x[:, :4].sum()
    return M()


def test_buffer_written_through_views():
    data = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    ep = ember.export.export(_module(ember), (ember.tensor(data),)).run_decompositions()
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert not any(getattr(t, "mutated_idx", None) for t in targets)
    kinds = [s.kind.name for s in ep.graph_signature.output_specs]
    assert kinds == ["BUFFER_MUTATION", "USER_OUTPUT"]
    tep = _torch.export.export(_module(_torch), (_torch.tensor(data),)).run_decompositions()
    mod, tmod = ep.module(), tep.module()
    for _ in range(2):   # the second call reads the buffer the first wrote
        got, ref = mod(ember.tensor(data)), tmod(_torch.tensor(data))
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-6)
        np.testing.assert_allclose(mod.buf.numpy(), tmod.buf.numpy(), rtol=1e-6)
