"""ember.compile(opt.step, mode="reduce-overhead"): a capturable Adam/AdamW (step counters on the
device) and SGD with momentum are captured in a CUDA graph and replay equal to eager steps; a
non-capturable Adam (host step counters) falls back with its reason. Scripts run in this process
on a GPU, else on the fake device (Triton's interpreter) in a subprocess."""
from cuda_helpers import run_script

SCRIPT = r"""
import numpy as np
import ember
import ember._dynamo as dynamo
import ember._dynamo.cudagraphs as cg

nn = ember.nn
x = None

def run(make_opt, compiled, steps=5):
    global x
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).cuda()
    x = ember.randn(5, 4, device="cuda")
    opt = make_opt(m.parameters())
    step = ember.compile(opt.step, mode="reduce-overhead") if compiled else opt.step
    for k in range(steps):
        opt.zero_grad(set_to_none=False)   # gradients stay where the graph reads them
        (m(x) * (k + 1)).square().sum().backward()
        step()
    return [p.detach().cpu().numpy() for p in m.parameters()], opt

for name, make, recorded in (
        ("adamw capturable", lambda ps: ember.optim.AdamW(ps, lr=1e-2, capturable=True), 1),
        ("adam amsgrad capturable",
         lambda ps: ember.optim.Adam(ps, lr=1e-2, amsgrad=True, weight_decay=0.1,
                                     capturable=True), 1),
        ("sgd momentum", lambda ps: ember.optim.SGD(ps, lr=0.05, momentum=0.9), 1),
        ("adam host steps", lambda ps: ember.optim.Adam(ps, lr=1e-2), 0)):
    dynamo.reset()
    cg.skips.clear()
    cg.counters.update(recorded=0, replayed=0)
    want, _ = run(make, False)
    got, opt = run(make, True)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=name)
    assert cg.counters["recorded"] == recorded, (name, cg.counters, cg.skips)
    if recorded:
        assert cg.counters["replayed"] >= 2, (name, cg.counters)
        assert cg.skips == [], (name, cg.skips)
    else:
        assert any("cpu device" in s for s in cg.skips), (name, cg.skips)
    st = opt.state[opt.param_groups[0]["params"][0]].get("step")
    if st is not None and "capturable" in name:
        assert st.device.type == "cuda" and st.item() == 5, (name, st)
"""


def test_compiled_capturable_opt_step_replays_as_a_cuda_graph():
    run_script(SCRIPT, "cudagraphs_optim")
