"""Where an ember GPU train step spends its time: host fallbacks and a Python profile of the
benchmark's GPT-2 step (bf16) and CNN step. `python packages/devices/tests/gpu_profile.py`."""
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks"))
import ember  # noqa: E402

sys.modules["torch"] = ember
import workloads  # noqa: E402


def gpt_step():
    cfg = dict(vocab=50304, block=1024, n_layer=12, n_head=12, n_embd=768)
    model = workloads.gpt(ember, **cfg).to("cuda").to(ember.bfloat16)
    opt = ember.optim.AdamW(model.parameters(), lr=3e-4)
    idx = ember.randint(0, cfg["vocab"], (8, cfg["block"]), device="cuda")

    def step():
        opt.zero_grad()
        model(idx, idx).backward()
        opt.step()
    return step


def main():
    step = gpt_step()
    for _ in range(2):
        step()
    ember.cuda.synchronize()
    before = dict(ember.cuda.host_memory_fallbacks())
    t = time.perf_counter()
    pr = cProfile.Profile()
    pr.enable()
    step()
    ember.cuda.synchronize()
    pr.disable()
    print(f"gpt step (profiled): {(time.perf_counter() - t) * 1e3:.0f} ms")
    after = ember.cuda.host_memory_fallbacks()
    print("host fallbacks in one step:", {k: v - before.get(k, 0) for k, v in after.items()
                                          if v != before.get(k, 0)})
    st = pstats.Stats(pr)
    st.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
