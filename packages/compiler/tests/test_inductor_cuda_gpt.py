"""The workloads' GPT train step through backend="inductor" on cuda tensors (AdamW, three
steps): losses equal eager's. On the H200 a factory recomputed in the backward graph ended in an
illegal memory access here (the partitioner saves CUDA factories now). Runs on the fake device
(Triton's interpreter) where there is no GPU. The script asserts the step compiled as one
graph (the block's generator expression once ran the whole forward eagerly)."""
from cuda_helpers import run_script

SCRIPT = r"""
import numpy as np, ember
from inductor_helpers import GPT, Recorder, V, T

rec = Recorder()

def run(compiled):
    ember.manual_seed(0)
    model = GPT().cuda()
    opt = ember.optim.AdamW(model.parameters(), lr=1e-2)
    idx = ember.randint(0, V, (2, T), device="cuda")
    m = ember.compile(model, backend=rec, fullgraph=True) if compiled else model
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = m(idx, idx)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses

np.testing.assert_allclose(run(True), run(False), rtol=1e-4, atol=1e-5)
# compiled whole (the generator expression over q, k, v inlined): one graph, every op in it
(gm,) = rec.captured
ops = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
assert "<OpDef softmax>" in ops and "<OpDef nll_loss_forward>" in ops and len(ops) > 30, ops
assert len(rec.counts()) == 2   # its forward and backward ran as generated kernels
print("ok")
"""


def test_gpt_train_step_compiled_on_cuda():
    run_script(SCRIPT, "test_cuda_inductor_gpt")
