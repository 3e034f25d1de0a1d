"""The workloads' GPT train step through backend="inductor" on cuda tensors (AdamW, three
steps): losses equal eager's. On the H200 a factory recomputed in the backward graph ended in an
illegal memory access here (the partitioner saves CUDA factories now). Runs on the fake device
(Triton's interpreter) where there is no GPU. The script asserts the step compiled as one
graph (the block's generator expression once ran the whole forward eagerly)."""
from cuda_helpers import run_script

SCRIPT = r"""
import math
import numpy as np, ember, ember._dynamo.backends
nn, F = ember.nn, ember.nn.functional
C, H, V, T = 16, 2, 32, 8

class Block(nn.Module):   # the workloads' GPT block (benchmarks/workloads.py), tiny
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = ember.tril(ember.ones(T, T, device=x.device)) == 0
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))

class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, C), nn.Embedding(T, C)
        self.block, self.ln, self.head = Block(), nn.LayerNorm(C), nn.Linear(C, V, bias=False)

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(ember.arange(idx.shape[1], device=idx.device))
        logits = self.head(self.ln(self.block(x)))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

graphs = []
def inductor(gm, example_inputs):   # backend="inductor", keeping the graphs it is handed
    graphs.append(gm)
    return ember._dynamo.backends.inductor(gm, example_inputs)

def run(compiled):
    ember.manual_seed(0)
    model = GPT().cuda()
    opt = ember.optim.AdamW(model.parameters(), lr=1e-2)
    idx = ember.randint(0, 32, (2, 8), device="cuda")
    m = ember.compile(model, backend=inductor, fullgraph=True) if compiled else model
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
(gm,) = graphs
ops = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
assert "<OpDef softmax>" in ops and "<OpDef nll_loss_forward>" in ops and len(ops) > 30, ops
print("ok")
"""


def test_gpt_train_step_compiled_on_cuda():
    run_script(SCRIPT, "test_cuda_inductor_gpt")
