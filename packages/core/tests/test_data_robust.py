"""ember.utils.data against torch where programs go wrong: workers that vanish, huge samplers."""
import importlib.util
import os
import subprocess
import sys

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
