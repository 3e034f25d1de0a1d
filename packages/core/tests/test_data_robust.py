"""ember.utils.data against torch where programs go wrong: workers that vanish, huge samplers."""
import importlib.util
import itertools
import os
import subprocess
import sys
import tracemalloc

import pytest

# Runs in a subprocess (so a hang is a timeout, not a stuck suite) as `script MODULE MODE...`:
# a worker leaves without an error, by os._exit(0) or by a KeyboardInterrupt the worker swallows;
# prints one line per mode.
_QUITTER = """
import os, sys
data = __import__(sys.argv[1] + ".utils.data", fromlist=["x"])

class Quits(data.Dataset):
    def __len__(self):
        return 8

    def __init__(self, mode):
        self.mode = mode

    def __getitem__(self, i):
        if i == 3:
            if self.mode == "exit":
                os._exit(0)
            raise KeyboardInterrupt
        return i

class QuitsIter(data.IterableDataset):
    def __iter__(self):
        info = data.get_worker_info()
        if info.id == 1:
            os._exit(0)
        return iter(range(info.id, 20, info.num_workers))

for mode in sys.argv[2:]:
    ds = QuitsIter() if mode == "iter" else Quits(mode)
    try:
        print(mode, list(data.DataLoader(ds, batch_size=2, num_workers=2)), flush=True)
    except RuntimeError as e:
        print(mode, "RuntimeError:", e, flush=True)
"""

MODES = ["exit", "interrupt", "iter"]
# torch as the reference on one mode only: it checks its workers every 5 s


@pytest.fixture(scope="module")
def quitter_runs():
    """{module: {mode: output line}}, both runs at once."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    runs = {"ember": MODES}
    if importlib.util.find_spec("torch"):  # ember is checked with or without the reference
        runs["torch"] = MODES[:1]
    procs = {m: subprocess.Popen([sys.executable, "-c", _QUITTER, m, *modes], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for m, modes in runs.items()}
    out = {}
    try:
        for m, p in procs.items():
            stdout, stderr = p.communicate(timeout=90)
            lines = [ln.split(" ", 1) for ln in stdout.splitlines()]
            out[m] = {k: v for k, v in lines}
            assert set(out[m]) == set(runs[m]), (m, stdout, stderr)
    finally:
        for p in procs.values():
            p.kill()
    return out


@pytest.mark.parametrize("mode", MODES)
def test_worker_that_exits_quietly_raises(quitter_runs, mode):
    for m, lines in quitter_runs.items():
        if mode in lines:
            line = lines[mode]
            assert line.startswith("RuntimeError: DataLoader worker (pid(s) "), (m, line)
            assert line.endswith(") exited unexpectedly"), (m, line)


def _modules():
    import ember
    mods = [ember]
    if importlib.util.find_spec("torch"):
        import torch
        mods.append(torch)
    return mods


def test_random_sampler_with_replacement_draws_lazily():
    import ember
    from ember.utils.data import RandomSampler
    # 10**7 samples drawn at once would be 80 MB; lazily, 32 at a time, a few hundred bytes
    s = RandomSampler(range(10), replacement=True, num_samples=10**7)
    tracemalloc.start()
    try:
        first = list(itertools.islice(iter(s), 5))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
    assert len(first) == 5 and all(0 <= i < 10 for i in first)
    # so 10**10 (74 GiB at once) starts at once too
    big = RandomSampler(range(3), replacement=True, num_samples=10**10,
                        generator=ember.Generator().manual_seed(1))
    assert len(big) == 10**10
    assert all(0 <= i < 3 for i in itertools.islice(iter(big), 100))


@pytest.mark.parametrize("num_samples", [5, 32, 70])
def test_random_sampler_draws_32_at_a_time_from_its_generator(num_samples):
    for t in _modules():
        sampler_cls = __import__(t.__name__ + ".utils.data", fromlist=["x"]).RandomSampler
        got = list(sampler_cls(range(7), replacement=True, num_samples=num_samples,
                               generator=t.Generator().manual_seed(3)))
        g = t.Generator().manual_seed(3)
        sizes = [32] * (num_samples // 32) + [num_samples % 32]
        want = [i for k in sizes for i in t.randint(0, 7, (k,), generator=g).tolist()]
        assert got == want, t.__name__
        # a partly consumed sampler has used one whole chunk of its generator
        g1, g2 = t.Generator().manual_seed(4), t.Generator().manual_seed(4)
        it = iter(sampler_cls(range(7), replacement=True, num_samples=1000, generator=g1))
        assert len(list(itertools.islice(it, 3))) == 3
        t.randint(0, 7, (32,), generator=g2)
        assert t.randint(0, 7, (9,), generator=g1).tolist() == \
            t.randint(0, 7, (9,), generator=g2).tolist(), t.__name__


def test_random_sampler_arguments():
    for t in _modules():
        data = __import__(t.__name__ + ".utils.data", fromlist=["x"])
        with pytest.raises(TypeError, match="replacement should be a boolean value"):
            data.RandomSampler(range(3), replacement=1)
        with pytest.raises(ValueError, match="num_samples should be a positive integer"):
            data.RandomSampler(range(3), replacement=True, num_samples=0)
