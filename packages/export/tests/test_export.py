"""ember.export against torch.export (2.13): programs of the workloads' model kinds exported and
run through `.module()`, PT2 archives both ways (ember's read by torch.export.load, torch's read
by ember.export.load), input guards, Dim specs, and hostile archives."""
import io
import json
import zipfile

import numpy as np
import pytest

import ember
import ember.export as E

torch = pytest.importorskip("torch")


def _mlp(t):
    t.manual_seed(0)
    return t.nn.Sequential(t.nn.Linear(8, 16), t.nn.GELU(), t.nn.Linear(16, 4))


def _cnn(t):
    t.manual_seed(0)
    m = t.nn.Sequential(t.nn.Conv2d(3, 4, 3, padding=1), t.nn.BatchNorm2d(4), t.nn.ReLU(),
                        t.nn.MaxPool2d(2), t.nn.Flatten(), t.nn.Linear(4 * 4 * 4, 5))
    return m.eval()


class _Block:
    """A pre-norm attention block (the GPT workload's layer), written once for both libraries."""

    @staticmethod
    def make(t):
        class Block(t.nn.Module):
            def __init__(self, d=16, h=2):
                super().__init__()
                self.h = h
                self.ln = t.nn.LayerNorm(d)
                self.qkv = t.nn.Linear(d, 3 * d)
                self.proj = t.nn.Linear(d, d)

            def forward(self, x):
                b, n, d = x.shape
                q, k, v = self.qkv(self.ln(x)).split(d, dim=2)
                q = q.view(b, n, self.h, d // self.h).transpose(1, 2)   # (B, h, T, hs)
                k = k.view(b, n, self.h, d // self.h).transpose(1, 2)
                v = v.view(b, n, self.h, d // self.h).transpose(1, 2)
                y = t.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
                return x + self.proj(y.transpose(1, 2).reshape(b, n, d))
        t.manual_seed(0)
        return Block().eval()


MODELS = {"mlp": (_mlp, (4, 8)), "cnn": (_cnn, (2, 3, 8, 8)), "gpt_block": (_Block.make,
                                                                            (2, 5, 16))}


def _same_weights(em, tm):
    with torch.no_grad():
        for (n, p) in tm.state_dict().items():
            em.state_dict()[n].copy_(ember.tensor(p.numpy()))


@pytest.mark.parametrize("name", MODELS)
def test_export_module_equals_eager(name):
    make, shape = MODELS[name]
    m = make(ember)
    x = ember.randn(*shape)
    ep = E.export(m, (x,))
    assert isinstance(ep, E.ExportedProgram)
    assert [s.kind.name for s in ep.graph_signature.input_specs][-1] == "USER_INPUT"
    assert set(ep.graph_signature.parameters) == {n for n, _ in m.named_parameters()}
    out = ep.module()(x)
    np.testing.assert_allclose(out.detach().numpy(), m(x).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    assert set(ep.module().state_dict()) == set(m.state_dict())
    with pytest.raises(RuntimeError, match="use `exported_program.module\\(\\)`"):
        ep(x)


@pytest.mark.parametrize("name", MODELS)
def test_ember_archive_loads_in_torch(name, tmp_path):
    make, shape = MODELS[name]
    m, tm = make(ember), make(torch)
    _same_weights(m, tm)
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    path = str(tmp_path / f"{name}.pt2")
    E.save(E.export(m, (ember.tensor(x),)), path)
    tep = torch.export.load(path)
    want = tm(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(tep.module()(torch.tensor(x)).detach().numpy(), want, rtol=1e-4,
                               atol=1e-5)
    back = E.load(path)             # and ember reads its own archive
    np.testing.assert_allclose(back.module()(ember.tensor(x)).detach().numpy(), want,
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", MODELS)
def test_torch_archive_with_dynamic_batch_loads_in_ember(name, tmp_path):
    make, shape = MODELS[name]
    tm, m = make(torch), make(ember)
    _same_weights(m, tm)
    batch = torch.export.Dim("batch", min=1, max=64)
    x = torch.randn(*shape)
    path = str(tmp_path / "t.pt2")
    torch.export.save(torch.export.export(tm, (x,), dynamic_shapes=({0: batch},)), path)
    ep = E.load(path)
    assert [str(v) for v in ep.range_constraints.values()] == ["VR[1, 64]"]
    mod = ep.module()
    for b in (shape[0], 3, 7):       # one graph for every batch size in range
        xb = torch.randn(b, *shape[1:])
        got = mod(ember.tensor(xb.numpy())).detach().numpy()
        np.testing.assert_allclose(got, tm(xb).detach().numpy(), rtol=1e-4, atol=1e-5)
    # the guards of the exported shapes, as PyTorch's .module() raises them
    bad = [torch.randn(65, *shape[1:]), torch.randn(2, *[s + 1 for s in shape[1:]])]
    for t in bad:
        with pytest.raises(AssertionError) as te:
            torch.export.load(path).module()(t)
        with pytest.raises(AssertionError) as ee:
            mod(ember.tensor(t.numpy()))
        assert str(ee.value) == str(te.value)
    with pytest.raises(ValueError, match="input tree spec"):
        mod(ember.randn(*shape), ember.randn(*shape))


def test_dim_specs_as_torch():
    for t in (torch.export, E):
        b = t.Dim("b", max=8)
        assert repr(b) == "Dim('b', min=0, max=8)"
        assert repr(2 * b) == "2*b" and repr(b + 1) == "b + 1"
        assert (b.min, b.max) == (0, 8)
        assert str(t.Dim.AUTO) == "DimHint(AUTO)" and str(t.Dim.STATIC) == "DimHint(STATIC)"
    with pytest.raises(E.UserError):
        E.Dim("b", min=4, max=2)


def test_dynamic_dims_are_refused_not_silently_specialized():
    m = _mlp(ember)
    x = ember.randn(4, 8)
    with pytest.raises(E.UserError, match=r"Constraints violated \(batch\)"):
        E.export(m, (x,), dynamic_shapes={"input": {0: E.Dim("batch")}})
    with pytest.raises(E.UserError, match="outside its range"):
        E.export(m, (x,), dynamic_shapes=({0: E.Dim("batch", min=5, max=9)},))
    ep = E.export(m, (x,), dynamic_shapes=({0: E.Dim.STATIC},))   # static specs are fine
    with pytest.raises(AssertionError, match=r"Guard failed: input_1.size\(\)\[0\] == 4"):
        ep.module()(ember.randn(5, 8))


def _archive(tmp_path, edit):
    """torch's archive of a Linear, with edit(model_json, weights_config, files) applied."""
    tm = torch.nn.Linear(3, 2)
    path = str(tmp_path / "a.pt2")
    torch.export.save(torch.export.export(tm, (torch.randn(2, 3),)), path)
    with zipfile.ZipFile(path) as z:
        files = {n: z.read(n) for n in z.namelist()}
    prefix = next(n for n in files if n.endswith("archive_format"))[:-len("archive_format")]
    model = json.loads(files[prefix + "models/model.json"])
    wcfg = json.loads(files[prefix + "data/weights/model_weights_config.json"])
    edit(model, wcfg, files, prefix)
    files[prefix + "models/model.json"] = json.dumps(model).encode()
    files[prefix + "data/weights/model_weights_config.json"] = json.dumps(wcfg).encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for n, b in files.items():
            z.writestr(n, b)
    buf.seek(0)
    return buf


def _set_expr(model, *_):
    tv = model["graph_module"]["graph"]["tensor_values"]
    name = next(iter(tv))
    tv[name]["sizes"][0] = {"as_expr": {"expr_str": "__import__('os').system('true')"}}


def _bad_target(model, *_):
    model["graph_module"]["graph"]["nodes"][0]["target"] = "os.system"


def _short_weight(model, wcfg, files, prefix):
    entry = next(iter(wcfg["config"].values()))
    files[prefix + "data/weights/" + entry["path_name"]] = b"\0" * 4


def _pickled_weight(model, wcfg, *_):
    next(iter(wcfg["config"].values()))["use_pickle"] = True


@pytest.mark.parametrize("edit,match", [
    (_set_expr, "unreadable size expression"), (_bad_target, "unsupported call target 'os.system'"),
    (_short_weight, "needs 24"), (_pickled_weight, "pickled"),
], ids=["expr", "target", "short", "pickle"])
def test_hostile_archives_are_refused(tmp_path, edit, match):
    with pytest.raises(E.SerializationError, match=match):
        E.load(_archive(tmp_path, edit))


def test_not_an_archive(tmp_path):
    p = tmp_path / "x.pt2"
    p.write_bytes(b"not a zip")
    with pytest.raises(E.SerializationError, match="not a PT2 archive"):
        E.load(str(p))


def test_overload_table_names_real_torch_overloads():
    """_aten_overloads (tools/gen_aten_overloads.py): each named PyTorch overload exists with
    the entry's argument names and the recorded Tensor/Scalar kinds."""
    from ember._ops import OPS
    from ember.export._aten_overloads import OVERLOADS
    assert OVERLOADS
    for name, cands in OVERLOADS.items():
        op = OPS[name]
        for ov, kinds in cands:
            schema = getattr(getattr(torch.ops.aten, name), ov)._schema
            assert [a.name for a in schema.arguments] == list(op.arg_names), (name, ov)
            types = {a.name: str(a.type) for a in schema.arguments}
            assert "".join("T" if "Tensor" in types[op.arg_names[i]] else "S"
                           for i in op.tensor_idx) == kinds, (name, ov)
