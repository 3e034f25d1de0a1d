"""Train steps of the workloads' MLP and CNN, eager vs ember.compile(mode="reduce-overhead")
(CUDA graphs of the compiled forward and backward), on a GPU:
    PYTHONPATH=packages/core/src:packages/autograd/src:packages/devices/src:packages/compiler/src \
        python3 packages/devices/tests/gpu_cudagraph_bench.py [mlp,cnn] [steps]
Prints ms per step (wall time over `steps` steps, synchronized at the end) and the loss of the
first steps each way (they start from the same weights, so they must agree). A third way,
"reduce-overhead+opt", also captures `opt.step` (a capturable optimizer; the gradients are the
backward graph's outputs, at the same addresses every step)."""
import sys
import time

import ember
import ember._dynamo.cudagraphs as cg

F = ember.nn.functional


def models():
    nn = ember.nn
    return {
        "mlp": (lambda: nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512),
                                      nn.ReLU(), nn.Linear(512, 10)),
                (256, 784), lambda m, **k: ember.optim.AdamW(m.parameters(), lr=1e-3, **k)),
        "cnn": (lambda: nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3),
                                      nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                      nn.Linear(9216, 128), nn.ReLU(), nn.Linear(128, 10)),
                (64, 1, 28, 28),
                lambda m, **k: ember.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)),
    }


def run(name, steps):
    make, xshape, optim = models()[name]
    ember.manual_seed(0)
    eager = make().cuda()
    graphed = make().cuda()
    graphed.load_state_dict(eager.state_dict())
    whole = make().cuda()
    whole.load_state_dict(eager.state_dict())
    xb = ember.randn(*xshape, device="cuda")
    yb = ember.randint(0, 10, (xshape[0],), device="cuda")
    res = {}
    for label, model in (("eager", eager), ("reduce-overhead", graphed),
                         ("reduce-overhead+opt", whole)):
        opt = optim(model, capturable=True) if label.endswith("opt") else optim(model)
        fn = (lambda x, y, m=model: F.cross_entropy(m(x), y))
        if label != "eager":
            fn = ember.compile(fn, mode="reduce-overhead")
        opt_step = ember.compile(opt.step, mode="reduce-overhead") if label.endswith("opt") \
            else opt.step
        losses = []

        def step(opt=opt, fn=fn, opt_step=opt_step):
            opt.zero_grad()
            loss = fn(xb, yb)
            loss.backward()
            opt_step()
            return loss
        for _ in range(3):  # warm-up (and, compiled: capture, record)
            losses.append(step().item())
        ember.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(steps):
            step()
        ember.cuda.synchronize()
        res[label] = ((time.perf_counter() - t) / steps * 1e3, losses)
    for label, (ms, losses) in res.items():
        print(f"{name} {label}: {ms:.3f} ms/step; first losses {[round(x, 5) for x in losses]}")
    print(f"{name} cudagraphs: {cg.counters}; skipped: {cg.skips}")


if __name__ == "__main__":
    which = sys.argv[1].split(",") if len(sys.argv) > 1 else ["mlp", "cnn"]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    for w in which:
        run(w, n)
