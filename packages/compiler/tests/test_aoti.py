"""AOT Inductor: exported MLP, CNN and transformer block packaged into .pt2 files, loaded in a
fresh process and from a C program (aoti_c/run_model.c, built here against ember/abi.h and the
embedded interpreter that holds core's ABI table); outputs equal ep.module() and PyTorch's eager.
"""
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import numpy as np
import pytest
import torch

import ember
import ember._inductor as ind
from ember.export import export

# The package's library gets core's ABI table from ember._C (built by Bazel; from source it is
# absent, as for core's test_abi_c.py).
pytest.importorskip("ember._C", reason="ember._C not built (running from source)")
HERE = os.path.dirname(os.path.abspath(__file__))


def _block(nn, F):
    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(6, 16), nn.Linear(16, 3)

        def forward(self, x):
            return self.fc2(F.gelu(self.fc1(x))).tanh()

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.fc = nn.Linear(4 * 4 * 4, 5)

        def forward(self, x):
            y = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)  # (B, 4, 4, 4)
            return F.log_softmax(self.fc(y.flatten(1)), -1)

    class Block(nn.Module):
        def __init__(self, d=8, h=2):
            super().__init__()
            self.h = h
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q = q.view(B, T, self.h, C // self.h).transpose(1, 2)  # (B, nh, T, hs)
            k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
            v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
            att = F.softmax(q @ k.transpose(-2, -1) * (1.0 / (C // self.h) ** 0.5), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.proj(y)
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    return {"mlp": (MLP, (5, 6)), "cnn": (CNN, (2, 3, 8, 8)), "block": (Block, (2, 5, 8))}


MODELS = _block(ember.nn, ember.nn.functional)
TORCH = _block(torch.nn, torch.nn.functional)


def _c_input(shape):
    """The input run_model.c makes: ((i * 37) % 101) / 50 - 1 at flat index i."""
    n = int(np.prod(shape))
    return (((np.arange(n) * 37) % 101).astype(np.float32) / np.float32(50.0)
            - np.float32(1.0)).reshape(shape)


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    """{name: (package path, ember model, torch model, input array)}."""
    d = tmp_path_factory.mktemp("aoti")
    ember.manual_seed(0)
    out = {}
    for name, (cls, shape) in MODELS.items():
        m = cls().eval()
        if name == "cnn":  # running statistics that matter
            m.bn.running_mean.copy_(ember.randn(4) * 0.1)
            m.bn.running_var.copy_(ember.rand(4) + 0.5)
        tm = TORCH[name][0]().eval()
        tm.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                            for k, v in m.state_dict().items()})
        x = _c_input(shape)
        ep = export(m, (ember.tensor(x),))
        path = ind.aoti_compile_and_package(ep, package_path=str(d / f"{name}.pt2"))
        out[name] = (path, m, ep, tm, x)
    return out


def _torch_out(tm, x):
    with torch.no_grad():
        return tm(torch.from_numpy(x)).numpy()


def test_package_is_a_zip_of_json_raw_weights_and_a_library(packages):
    path = packages["cnn"][0]
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        meta = json.loads(z.read("model/metadata.json"))
        assert not any(n.endswith((".pkl", ".pt")) for n in names)
    assert {"model/data/aotinductor/model.so", "model/data/aotinductor/model.cpp",
            "model/data/weights/weights.bin"} <= names
    assert meta["inputs"][0]["shape"] == [2, 3, 8, 8]
    assert {c["name"] for c in meta["constants"]} >= {"p_conv_weight", "b_bn_running_var"}


def test_library_calls_ember_only_through_the_abi(packages):
    """The generated source includes ember/abi.h and no Python or pybind11 header; the library
    imports no symbol from libpython or ember._C."""
    path = packages["mlp"][0]
    with zipfile.ZipFile(path) as z:
        src = z.read("model/data/aotinductor/model.cpp").decode()
    assert '#include "ember/abi.h"' in src
    assert "Python.h" not in src and "pybind11" not in src
    nm = shutil.which("nm")
    if nm:
        import tempfile
        with tempfile.TemporaryDirectory() as d, zipfile.ZipFile(path) as z:
            so = z.extract("model/data/aotinductor/model.so", d)
            undefined = subprocess.run([nm, "-D", "--undefined-only", so], capture_output=True,
                                       text=True, check=True).stdout
        assert "Py" not in undefined and "ember" not in undefined


@pytest.mark.parametrize("name", list(MODELS))
def test_loaded_package_equals_module_and_torch(packages, name):
    path, m, ep, tm, x = packages[name]
    model = ind.aoti_load_package(path)
    y = model(ember.tensor(x))
    ref = ep.module()(ember.tensor(x))
    np.testing.assert_allclose(y.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y.numpy(), _torch_out(tm, x), rtol=1e-4, atol=1e-5)
    assert model.get_metadata()["device"] == "cpu"
    # another input of the exported shape gives another answer (not a baked-in result)
    x2 = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    np.testing.assert_allclose(model(ember.tensor(x2)).numpy(), _torch_out(tm, x2),
                               rtol=1e-4, atol=1e-5)


_FRESH = """
import sys, numpy as np, ember, ember._inductor as ind
for path, xin, yout in zip(*[iter(sys.argv[1:])] * 3):
    np.save(yout, ind.aoti_load_package(path)(ember.tensor(np.load(xin))).numpy())
"""


def test_fresh_process_loads_the_packages(packages, tmp_path):
    argv = []
    for name, (path, _, _, _, x) in packages.items():
        np.save(tmp_path / f"{name}_x.npy", x)
        argv += [path, str(tmp_path / f"{name}_x.npy"), str(tmp_path / f"{name}_y.npy")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", _FRESH, *argv], check=True, env=env, timeout=120)
    for name, (_, _, _, tm, x) in packages.items():
        np.testing.assert_allclose(np.load(tmp_path / f"{name}_y.npy"), _torch_out(tm, x),
                                   rtol=1e-4, atol=1e-5)


def test_bad_inputs_name_the_input(packages):
    path, _, _, _, x = packages["cnn"]
    model = ind.aoti_load_package(path)
    with pytest.raises(RuntimeError, match=r"input 0 \('x'\): expected shape \[2, 3, 8, 8\], "
                                           r"got \[2, 3, 8, 9\]"):
        model(ember.zeros(2, 3, 8, 9))
    with pytest.raises(RuntimeError, match=r"input 0 \('x'\): expected dtype ember.float32"):
        model(ember.zeros(2, 3, 8, 8, dtype=ember.float64))
    with pytest.raises(RuntimeError, match=r"expected 1 inputs \(x\), got 2"):
        model(ember.tensor(x), ember.tensor(x))
    # a non-contiguous input of the right shape is copied, not misread
    xt = ember.tensor(np.ascontiguousarray(x.transpose(0, 1, 3, 2))).transpose(2, 3)
    np.testing.assert_allclose(model(xt).numpy(), model(ember.tensor(x)).numpy())


@pytest.fixture(scope="module")
def c_program(tmp_path_factory):
    import ember_abi
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler is needed to build the C host"
    exe = str(tmp_path_factory.mktemp("aoti_c") / "run_model")
    paths = sysconfig.get_paths()
    libdir = sysconfig.get_config_var("LIBDIR")
    ver = sysconfig.get_config_var("LDVERSION") or sysconfig.get_config_var("VERSION")
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1",
                    "-I", ember_abi.get_include(), "-I", paths["include"],
                    os.path.join(HERE, "aoti_c", "run_model.c"), "-o", exe,
                    f"-L{libdir}", f"-Wl,-rpath,{libdir}", f"-lpython{ver}", "-ldl", "-lm"],
                   check=True, capture_output=True, text=True)
    return exe


def _run_c(exe, path, shape, tmp_path):
    with zipfile.ZipFile(path) as z:
        z.extractall(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([exe, str(tmp_path / "model"), *map(str, shape)], capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.mark.parametrize("name", ["cnn", "block"])
def test_c_program_runs_the_package(packages, c_program, name, tmp_path):
    path, _, _, tm, x = packages[name]
    r = _run_c(c_program, path, x.shape, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    want = _torch_out(tm, x)
    assert lines[0] == "output 0: " + " ".join(map(str, want.shape))
    got = np.array([float(v) for v in lines[1:]], dtype=np.float32).reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_c_program_gets_the_input_error(packages, c_program, tmp_path):
    r = _run_c(c_program, packages["mlp"][0], (5, 7), tmp_path)
    assert r.returncode == 1
    assert "error: ember_aoti_run: input 0 ('x'): expected shape [5, 6], got [5, 7]" in r.stdout


def test_refuses_what_a_package_cannot_hold():
    class Counter(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", ember.zeros(1))

        def forward(self, x):
            self.n.add_(1)
            return x + self.n

    ep = export(Counter(), (ember.ones(2),))
    with pytest.raises(NotImplementedError, match="mutates"):
        ind.aoti_compile_and_package(ep)


def test_two_inputs_two_outputs_and_a_saved_program(tmp_path):
    class Two(ember.nn.Module):
        def forward(self, a, b):
            s = (a * b).sum(-1)
            return s, a.relu() + b

    a, b = ember.randn(3, 4), ember.randn(3, 4)
    ep = export(Two(), (a, b))
    buf = tmp_path / "two.pt2e"
    ember.export.save(ep, str(buf))
    ep = ember.export.load(str(buf))  # no example inputs: shapes come from the placeholders
    model = ind.aoti_load_package(ind.aoti_compile_and_package(
        ep, package_path=str(tmp_path / "two.pt2")))
    s, r = model(a, b)
    np.testing.assert_allclose(s.numpy(), (a * b).sum(-1).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r.numpy(), (a.relu() + b).numpy())
    with pytest.raises(RuntimeError, match=r"input 1 \('b'\): expected shape \[3, 4\]"):
        model(a, ember.randn(4, 3))


def test_tensors_the_graph_holds_go_into_the_weights(tmp_path):
    class Scale(ember.nn.Module):
        def forward(self, x):
            return x * ember.tensor([1.0, 2.0, 3.0]) + 1

    x = ember.randn(2, 3)
    ep = export(Scale(), (x,))
    path = ind.aoti_compile_and_package(ep, package_path=str(tmp_path / "scale.pt2"))
    with zipfile.ZipFile(path) as z:
        meta = json.loads(z.read("model/metadata.json"))
    assert [c["shape"] for c in meta["constants"]] == [[3]]
    np.testing.assert_allclose(ind.aoti_load_package(path)(x).numpy(),
                               x.numpy() * np.array([1, 2, 3], np.float32) + 1)


def test_dead_buffers_are_reused(tmp_path):
    def f(x):  # runs on ember and torch tensors alike
        a = (x.exp().sum(-1, keepdim=True) * x).tanh()
        b = a.softmax(0)
        d = ((b * 2).sum(0, keepdim=True) + b).log_softmax(-1)
        return d.exp().sum(0) + d.mean(0)

    class F(ember.nn.Module):
        def forward(self, x):
            return f(x)

    x = ember.randn(16, 8)
    path = ind.aoti_compile_and_package(export(F(), (x,)),
                                        package_path=str(tmp_path / "f.pt2"))
    with zipfile.ZipFile(path) as z:
        src = z.read("model/data/aotinductor/model.cpp").decode()
    assert "reuses" in src  # a freed intermediate's memory backs a later one
    np.testing.assert_allclose(ind.aoti_load_package(path)(x).numpy(),
                               f(torch.from_numpy(x.numpy())).numpy(), rtol=1e-5, atol=1e-6)
