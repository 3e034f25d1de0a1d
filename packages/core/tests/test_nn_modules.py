"""ember.nn.Module mechanics vs torch.nn.Module: registration, iteration, state dicts, repr,
hooks, train/eval, conversions, containers, Parameter."""
from __future__ import annotations

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest
from harness import check_error, compare

import ember

torch = pytest.importorskip("torch")


def net(t):
    """The same small model in ember or torch: nested modules, a shared module, buffers."""
    nn = t.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 4)
            self.act = nn.ReLU()
            self.register_buffer("scale", t.ones(4))
            self.register_buffer("tmp", t.zeros(2), persistent=False)

        def forward(self, x):
            return self.act(self.fc(x)) * self.scale

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.head = nn.Sequential(nn.Linear(4, 2), nn.Tanh())
            self.alias = self.block  # shared: must be reported once
            self.w = nn.Parameter(t.zeros(2))
            self.register_parameter("nothing", None)

        def forward(self, x):
            return self.head(self.block(x)) + self.w

    return Net()


def names(it):
    return [n for n, _ in it]


def test_named_members_match_torch():
    e, t = net(ember), net(torch)
    assert names(e.named_parameters()) == names(t.named_parameters())
    assert names(e.named_parameters(remove_duplicate=False)) == \
        names(t.named_parameters(remove_duplicate=False))
    assert names(e.named_parameters(recurse=False)) == names(t.named_parameters(recurse=False))
    assert names(e.named_buffers()) == names(t.named_buffers())
    assert names(e.named_modules()) == names(t.named_modules())
    assert names(e.named_modules(remove_duplicate=False)) == \
        names(t.named_modules(remove_duplicate=False))
    assert names(e.named_children()) == names(t.named_children())
    assert names(e.named_parameters(prefix="m")) == names(t.named_parameters(prefix="m"))
    assert len(list(e.parameters())) == len(list(t.parameters()))
    assert [type(m).__name__ for m in e.modules()] == [type(m).__name__ for m in t.modules()]


def test_state_dict_keys_shapes_and_metadata():
    e, t = net(ember), net(torch)
    es, ts = e.state_dict(), t.state_dict()
    assert isinstance(es, OrderedDict)
    assert list(es) == list(ts)
    assert [tuple(v.shape) for v in es.values()] == [tuple(v.shape) for v in ts.values()]
    assert es._metadata == ts._metadata
    assert not any(v.requires_grad for v in es.values())
    assert all(isinstance(v, ember.nn.Parameter) for k, v in e.state_dict(keep_vars=True).items()
               if k.endswith("weight"))
    assert list(e.state_dict(prefix="p.")) == list(t.state_dict(prefix="p."))


def _to_ember_sd(sd):
    return OrderedDict((k, ember.tensor(v.detach().numpy())) for k, v in sd.items())


def test_load_state_dict_copies_and_forward_matches():
    e, t = net(ember), net(torch)
    res = e.load_state_dict(_to_ember_sd(t.state_dict()))
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert repr(res) == repr(t.load_state_dict(t.state_dict()))
    w = e.block.fc.weight
    assert isinstance(w, ember.nn.Parameter) and w.requires_grad
    x = np.random.default_rng(0).standard_normal((5, 3)).astype("float32")
    compare(e(ember.tensor(x)), t(torch.tensor(x)))


def test_load_state_dict_errors_match_torch():
    e, t = net(ember), net(torch)
    tsd = t.state_dict()
    bad = dict(tsd)
    del bad["w"]
    bad["extra"] = torch.zeros(1)
    bad["block.fc.bias"] = torch.zeros(5)
    with pytest.raises(RuntimeError) as te:
        t.load_state_dict(bad)
    with pytest.raises(RuntimeError) as ee:
        e.load_state_dict(_to_ember_sd(bad))
    assert str(ee.value).replace("ember", "torch") == str(te.value)
    assert "size mismatch for block.fc.bias: copying a param with shape" in str(ee.value)
    res_e = e.load_state_dict(_to_ember_sd({k: v for k, v in tsd.items() if k != "w"}),
                              strict=False)
    res_t = t.load_state_dict({k: v for k, v in tsd.items() if k != "w"}, strict=False)
    assert tuple(res_e) == tuple(res_t) == (["w"], [])
    check_error(lambda m: m.nn.Linear(2, 2).load_state_dict([1, 2]), TypeError)


def test_load_state_dict_assign_keeps_requires_grad():
    e = ember.nn.Linear(2, 3)
    sd = {"weight": ember.ones(3, 2), "bias": ember.zeros(3)}
    e.load_state_dict(sd, assign=True)
    assert isinstance(e.weight, ember.nn.Parameter) and e.weight.requires_grad
    assert e.weight.tolist() == [[1.0, 1.0]] * 3


def test_repr_matches_torch():
    e, t = net(ember), net(torch)
    assert repr(e) == repr(t)
    ml_e = ember.nn.ModuleList([ember.nn.Linear(2, 2) for _ in range(3)] + [ember.nn.ReLU()])
    ml_t = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)] + [torch.nn.ReLU()])
    assert repr(ml_e) == repr(ml_t)
    assert repr(ember.nn.ModuleList()) == repr(torch.nn.ModuleList())
    md_e = ember.nn.ModuleDict({"a": ember.nn.Identity(), "b": ember.nn.Sequential()})
    md_t = torch.nn.ModuleDict({"a": torch.nn.Identity(), "b": torch.nn.Sequential()})
    assert repr(md_e) == repr(md_t)


def test_parameter_semantics():
    data = ember.zeros(3)
    p = ember.nn.Parameter(data)
    assert p.requires_grad and isinstance(p, ember.Tensor) and p.is_leaf
    assert p.data_ptr() == data.data_ptr()  # shares storage
    assert not ember.nn.Parameter(data, requires_grad=False).requires_grad
    assert ember.nn.Parameter().shape == (0,)
    q = copy.deepcopy(p)
    assert isinstance(q, ember.nn.Parameter) and q.data_ptr() != p.data_ptr()
    (p * 2)  # ops on parameters return plain tensors
    assert type(p * 2) is ember.Tensor


def test_parameter_repr():
    p = ember.nn.Parameter(ember.tensor([1.0, 2.0]))
    t = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    assert repr(p) == repr(t)


def test_buffer_class():
    for t in (ember, torch):
        m = t.nn.Module()
        m.b = t.nn.Buffer(t.ones(2))
        m.c = t.nn.Buffer(t.ones(2), persistent=False)
        assert list(m.state_dict()) == ["b"]
        assert names(m.named_buffers()) == ["b", "c"]
        m.b = t.zeros(3)  # reassigning a registered buffer keeps it a buffer
        assert "b" in m._buffers


def test_setattr_getattr_delattr():
    for t in (ember, torch):
        m = t.nn.Module()
        m.p = t.nn.Parameter(t.zeros(1))
        m.p = None
        assert "p" in m._parameters and m.p is None
        m.sub = t.nn.Linear(1, 1)
        del m.sub
        assert "sub" not in m._modules
        m.x = 3
        assert m.x == 3 and "x" in m.__dict__
        with pytest.raises(AttributeError, match="object has no attribute 'nope'"):
            _ = m.nope
    check_error(lambda t: setattr(_with_param(t), "p", t.zeros(1)), TypeError,
                match="cannot assign '.*' as parameter 'p'")
    check_error(lambda t: setattr(_with_child(t), "c", 1), TypeError)
    check_error(lambda t: t.nn.Module().register_buffer("a.b", None), KeyError)
    check_error(lambda t: t.nn.Module().register_buffer("", None), KeyError)
    check_error(lambda t: t.nn.Module().register_buffer("x", 3), TypeError)
    check_error(lambda t: t.nn.Module().register_parameter("x", t.zeros(1)), TypeError)
    check_error(lambda t: t.nn.Module().add_module("x", 3), TypeError)
    check_error(lambda t: t.nn.Linear(1, 1).register_buffer("weight", None), KeyError)
    check_error(lambda t: t.nn.Module().forward(1), NotImplementedError)
    check_error(lambda t: t.nn.Module().train("yes"), ValueError)


def _with_param(t):
    m = t.nn.Module()
    m.p = t.nn.Parameter(t.zeros(1))
    return m


def _with_child(t):
    m = t.nn.Module()
    m.c = t.nn.Identity()
    return m


def test_dir_and_submodule_access():
    e, t = net(ember), net(torch)
    for k in ("block", "head", "w", "forward"):
        assert k in dir(e)
    assert e.get_submodule("head.0") is e.head[0]
    assert e.get_parameter("block.fc.weight") is e.block.fc.weight
    assert e.get_buffer("block.scale") is e.block.scale
    for f in (lambda m: m.get_submodule("block.nope"), lambda m: m.get_submodule("w"),
              lambda m: m.get_parameter("block.scale"), lambda m: m.get_buffer("block.fc.weight")):
        with pytest.raises(AttributeError) as ee:
            f(e)
        with pytest.raises(AttributeError) as te:
            f(t)
        assert str(ee.value) == str(te.value)


def test_train_eval_requires_grad_zero_grad():
    e = net(ember)
    assert e.training and e.block.act.training
    assert e.eval() is e and not e.head[1].training
    e.train()
    assert e.head[1].training
    e.requires_grad_(False)
    assert not any(p.requires_grad for p in e.parameters())
    e.requires_grad_()
    for p in e.parameters():
        p.grad = ember.ones(p.shape)
    e.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in e.parameters())
    e.zero_grad()
    assert all(p.grad is None for p in e.parameters())


def test_to_and_dtype_conversions_keep_parameter_identity():
    e = ember.nn.BatchNorm1d(3) if hasattr(ember.nn, "BatchNorm1d") else None
    w = e.weight
    e.double()
    assert e.weight is w and w.dtype == ember.float64 and isinstance(w, ember.nn.Parameter)
    assert e.running_mean.dtype == ember.float64
    assert e.num_batches_tracked.dtype == ember.int64  # integer buffers keep their dtype
    e.to(ember.float32)
    assert w.dtype == ember.float32
    e.half()
    assert w.dtype == ember.float16
    e.bfloat16().float()
    assert w.dtype == ember.float32
    e.to("cpu", ember.float64)
    assert w.dtype == ember.float64
    e.to(ember.zeros(1, dtype=ember.float32))
    assert w.dtype == ember.float32 and e.cpu() is e
    check_error(lambda t: t.nn.Linear(1, 1).to(t.int32), TypeError)


def test_apply_and_share_memory():
    e = net(ember)
    seen = []
    e.apply(lambda m: seen.append(type(m).__name__))
    t = net(torch)
    seen_t = []
    t.apply(lambda m: seen_t.append(type(m).__name__))
    assert seen == seen_t
    assert e.share_memory() is e


@pytest.mark.parametrize("t", [ember, torch], ids=["ember", "torch"])
def test_forward_hooks_order_and_results(t):
    m = t.nn.Identity()
    log = []
    m.register_forward_pre_hook(lambda mod, args: log.append("pre1"))
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    m.register_forward_pre_hook(lambda mod, args: log.append("pre0"), prepend=True)
    m.register_forward_pre_hook(
        lambda mod, args, kwargs: log.append(("prekw", sorted(kwargs))), with_kwargs=True)
    h = m.register_forward_hook(lambda mod, args, out: out + 1)
    m.register_forward_hook(lambda mod, args, kwargs, out: log.append("postkw"),
                            with_kwargs=True)
    out = m(t.ones(2))
    assert out.tolist() == [3.0, 3.0]
    assert log == ["pre0", "pre1", ("prekw", []), "postkw"]
    h.remove()
    assert m(t.ones(2)).tolist() == [2.0, 2.0]
    with m.register_forward_hook(lambda mod, a, o: o * 0):
        assert m(t.ones(1)).tolist() == [0.0]
    assert m(t.ones(1)).tolist() == [2.0]


@pytest.mark.parametrize("t", [ember, torch], ids=["ember", "torch"])
def test_forward_hook_always_call_runs_on_error(t):
    class Boom(t.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    m = Boom()
    log = []
    m.register_forward_hook(lambda mod, a, o: log.append("always"), always_call=True)
    m.register_forward_hook(lambda mod, a, o: log.append("normal"))
    with pytest.raises(ValueError):
        m(t.ones(1))
    assert log == ["always"]


def test_global_forward_hooks():
    from ember.nn.modules.module import register_module_forward_hook
    log = []
    h = register_module_forward_hook(lambda mod, a, o: log.append(type(mod).__name__))
    try:
        ember.nn.Sequential(ember.nn.Identity())(ember.ones(1))
    finally:
        h.remove()
    assert log == ["Identity", "Sequential"]


def test_state_dict_hooks():
    m = ember.nn.Linear(2, 2)
    log = []
    m.register_state_dict_pre_hook(lambda mod, prefix, keep: log.append(("pre", prefix)))
    m.register_state_dict_post_hook(lambda mod, sd, prefix, meta: log.append(("post", len(sd))))
    m.register_load_state_dict_post_hook(lambda mod, keys: log.append(("load", tuple(keys))))
    m.load_state_dict(m.state_dict())
    assert log == [("pre", ""), ("post", 2), ("load", ([], []))]


def test_extra_state_round_trip():
    class WithExtra(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.value = 1

        def get_extra_state(self):
            return {"value": self.value}

        def set_extra_state(self, state):
            self.value = state["value"]

    a, b = WithExtra(), WithExtra()
    a.value = 7
    sd = a.state_dict()
    assert list(sd) == ["_extra_state"]
    b.load_state_dict(sd)
    assert b.value == 7


def test_sequential_behaviour_matches_torch():
    def build(t):
        return t.nn.Sequential(t.nn.Identity(), t.nn.ReLU(), t.nn.Tanh(), t.nn.Sigmoid())

    e, t = build(ember), build(torch)
    assert len(e) == 4 and type(e[1]).__name__ == "ReLU" and type(e[-1]).__name__ == "Sigmoid"
    assert repr(e[1:3]) == repr(t[1:3]) and isinstance(e[1:3], ember.nn.Sequential)
    del e[0]
    del t[0]
    assert list(e._modules) == list(t._modules) == ["0", "1", "2"]
    e.append(ember.nn.Identity())
    t.append(torch.nn.Identity())
    e.insert(0, ember.nn.ReLU6())
    t.insert(0, torch.nn.ReLU6())
    assert repr(e) == repr(t)
    assert repr(e + e) == repr(t + t) and len(e * 2) == 10
    assert [type(m).__name__ for m in e] == [type(m).__name__ for m in t]
    od = OrderedDict([("a", ember.nn.ReLU()), ("b", ember.nn.Tanh())])
    s = ember.nn.Sequential(od)
    assert list(s._modules) == ["a", "b"] and s.pop(0).__class__.__name__ == "ReLU"
    check_error(lambda m: m.nn.Sequential(m.nn.ReLU())[3], IndexError)
    x = ember.tensor([-1.0, 2.0])
    assert ember.nn.Sequential(ember.nn.ReLU(), ember.nn.Identity())(x).tolist() == [0.0, 2.0]


def test_module_list_and_dict():
    ml = ember.nn.ModuleList([ember.nn.ReLU(), ember.nn.Tanh()])
    ml.append(ember.nn.Identity())
    ml.extend([ember.nn.Sigmoid()])
    ml.insert(1, ember.nn.ReLU6())
    assert [type(m).__name__ for m in ml] == ["ReLU", "ReLU6", "Tanh", "Identity", "Sigmoid"]
    assert type(ml[-1]).__name__ == "Sigmoid" and len(ml[1:3]) == 2
    del ml[0]
    assert list(ml._modules) == ["0", "1", "2", "3"]
    ml += [ember.nn.ReLU()]
    assert len(ml) == 5
    check_error(lambda t: t.nn.ModuleList([t.nn.ReLU()])[2], IndexError)
    md = ember.nn.ModuleDict({"b": ember.nn.ReLU(), "a": ember.nn.Tanh()})
    assert list(md) == ["b", "a"] and "a" in md and len(md) == 2
    md["c"] = ember.nn.Identity()
    assert list(md.keys()) == ["b", "a", "c"]
    assert type(md.pop("b")).__name__ == "ReLU" and list(md) == ["a", "c"]
    md.update([("d", ember.nn.Identity())])
    assert list(md) == ["a", "c", "d"]
    outer = ember.nn.Module()
    outer.layers = ember.nn.ModuleList([ember.nn.Linear(1, 1), ember.nn.Linear(1, 1)])
    assert names(outer.named_parameters()) == ["layers.0.weight", "layers.0.bias",
                                                "layers.1.weight", "layers.1.bias"]


def test_parameter_list_and_dict_match_torch():
    def build(t):
        m = t.nn.Module()
        m.pl = t.nn.ParameterList([t.nn.Parameter(t.zeros(2, 3)), t.ones(4)])
        m.pd = t.nn.ParameterDict({"b": t.nn.Parameter(t.zeros(1)), "a": t.ones(2)})
        return m

    e, t = build(ember), build(torch)
    assert names(e.named_parameters()) == names(t.named_parameters())
    assert all(isinstance(p, ember.nn.Parameter) for p in e.pl)
    assert repr(e).replace("ember", "torch") == repr(t)
    assert list(e.pd.keys()) == list(t.pd.keys())
    e.pl.append(ember.zeros(1))
    assert len(e.pl) == 3 and isinstance(e.pl[-1], ember.nn.Parameter)
    check_error(lambda m: m.nn.ParameterList()(1), RuntimeError)


def test_deepcopy_and_pickle_round_trip():
    e = net(ember)
    c = copy.deepcopy(e)
    assert c.block is c.alias and c.block.fc.weight is not e.block.fc.weight
    assert names(c.named_parameters()) == names(e.named_parameters())
    m = ember.nn.Linear(2, 3)
    r = pickle.loads(pickle.dumps(m))
    assert type(r).__module__ == "ember.nn.modules.linear"
    assert isinstance(r.weight, ember.nn.Parameter) and r.weight.requires_grad
    np.testing.assert_array_equal(r.weight.detach().numpy(), m.weight.detach().numpy())


def test_module_init_rejects_unexpected_args():
    check_error(lambda t: t.nn.Module(foo=1), TypeError)


def test_lazy_linear_materializes_on_first_call():
    m = ember.nn.LazyLinear(3)
    assert repr(m.weight) == "<UninitializedParameter>"
    y = m(ember.ones(2, 5))
    assert type(m) is ember.nn.Linear and tuple(m.weight.shape) == (3, 5)
    assert tuple(y.shape) == (2, 3) and m.in_features == 5
    assert repr(m) == repr(torch.nn.Linear(5, 3))


def test_meta_device_and_to_empty():
    m = ember.nn.Linear(2, 3, device="meta")
    w = m.weight
    assert w.device.type == "meta" and tuple(w.shape) == (3, 2)
    m.to_empty(device="cpu")
    assert m.weight is w and w.device.type == "cpu" and isinstance(w, ember.nn.Parameter)
    m.reset_parameters()
    assert np.abs(w.detach().numpy()).max() <= 1 / np.sqrt(2)


def test_training_step_matches_torch():
    """A small MLP trained for a few SGD steps in both frameworks stays identical."""
    def build(t):
        return t.nn.Sequential(t.nn.Linear(4, 8), t.nn.GELU(), t.nn.LayerNorm(8),
                               t.nn.Linear(8, 3))

    tm, em = build(torch).double(), build(ember).double()
    em.load_state_dict(_to_ember_sd(tm.state_dict()))
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16, 4)), rng.integers(0, 3, 16)
    lr = 0.1
    for _ in range(3):
        for m, t in ((tm, torch), (em, ember)):
            m.zero_grad()
            loss = t.nn.CrossEntropyLoss()(m(t.tensor(x)), t.tensor(y))
            loss.backward()
            with t.no_grad():
                for p in m.parameters():
                    p -= lr * p.grad
    for (k, tv), ev in zip(tm.state_dict().items(), em.state_dict().values()):
        compare(ev, tv, "float64", path=k)
