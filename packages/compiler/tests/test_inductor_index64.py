"""Triton kernels index in int64 where an element index can pass 2**31 - 1 (ember._inductor.
index64): the decision on a lowering's sizes (meta inputs: no memory), the per-call guard of the
one-wrapper-for-every-size path, and, on the fake device with the limit lowered, compiled
graphs that take the int64 kernels past it and equal eager."""
import pytest
import sympy
from cuda_helpers import run_script

import ember
from ember._inductor import index64
from ember._inductor.dynamic import SymPlan
from ember._inductor.graph import build
from ember._inductor.lowering import GraphLowering
from ember.fx.experimental.proxy_tensor import make_fx

WIDE = "tl.program_id(0).to(tl.int64)"


def _sources(fn, *shapes):
    gm = make_fx(fn)(*[ember.ones(2, 3) for _ in shapes])
    meta = [ember.empty(s, device="meta") for s in shapes]
    g = GraphLowering(gm, meta, device="cuda").run()
    return "\n".join(build(g, compile_kernels=False).sources)


@pytest.mark.parametrize("fn", [lambda x, y: x * 2 + y, lambda x, y: (x * y).sum(1),
                                lambda x, y: (x.t() * y.t()).sum(0)])
def test_kernels_widen_only_past_int32(fn):
    small = _sources(fn, (4096, 4096), (4096, 4096))        # 2**24 elements
    # up to LIMIT elements (a block's lanes past the end still fit int32), then int64
    edge = _sources(fn, (2**15 - 1, 2**16), (2**15 - 1, 2**16))
    big = _sources(fn, (2**15 - 1, 2**16 + 1), (2**15 - 1, 2**16 + 1))
    assert (2**15 - 1) * 2**16 == index64.LIMIT
    assert WIDE not in small and WIDE not in edge
    # (counts that are constexprs, triton.const_numel, need no cast: Triton types them)
    assert WIDE in big and ("rnumel = rnumel.to(tl.int64)" in big or
                            "rnumel: tl.constexpr" in big)
    assert big.replace(".to(tl.int64)", "").count("program_id") == big.count("program_id")


def test_strided_input_reaching_far_widens():
    gm = make_fx(lambda x: x + 1)(ember.ones(2, 3))
    x = ember.empty(3 * 2**30 + 4, device="meta").as_strided((4, 4), (2**30, 1))  # 16 elements
    g = GraphLowering(gm, [x], device="cuda").run()
    assert index64.needs_int64(g)


def test_widen_casts_the_size_arguments():
    src = ("import triton\n@triton.jit(do_not_specialize=['ks0', 'xnumel', 'rnumel'])\n"
           "def k(p0, p1, ks0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):\n"
           "    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)\n"
           "    tl.store(p1 + xindex * ks0, tl.load(p0 + xindex))\n")
    out = index64.widen(src)
    for p in ("ks0", "xnumel", "rnumel"):
        assert f"    {p} = {p}.to(tl.int64)\n" in out
    assert "p0 = p0" not in out and "XBLOCK = " not in out
    assert "tl.program_id(0).to(tl.int64) * XBLOCK + tl.arange(0, XBLOCK).to(tl.int64)" in out


def test_symbolic_wrapper_guard():
    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    p = SymPlan([(s0, 16), (s0, s1)], [s0, s1], {s0: (0, 0), s1: (1, 1)})
    assert not index64.over_int32(p, [None, None])   # before the first lowering: no extents
    p.extents = [16 * s0, s0 * s1, s0 * s1 * 4]
    x = ember.empty(2**20, 16, device="meta")
    n = index64.LIMIT // 2**22   # 4 s0 s1 with s0 = 2**20
    assert not index64.over_int32(p, [x, ember.empty(2**20, n, device="meta")])
    assert index64.over_int32(p, [x, ember.empty(2**20, n + 1, device="meta")])


SCRIPT = r"""
import os
import numpy as np, ember
from ember._inductor import index64, compile_graph
saved, index64.LIMIT = index64.LIMIT, 1000   # as if 1000 were the int32 limit
cache = os.environ.get("EMBER_FX_GRAPH_CACHE")
os.environ["EMBER_FX_GRAPH_CACHE"] = "0"     # (no artifact compiled under the real limit)
try:
    graphs = []
    def backend(gm, ex):
        c = compile_graph(gm, ex)
        graphs.append(c)
        return c
    fn = lambda x, y: (x * 2 + y).sum(1) + x[:, 0]
    f = ember.compile(fn, backend=backend, dynamic=True)
    WIDE = "tl.program_id(0).to(tl.int64)"
    for b in (8, 40, 100, 9, 120):   # 16 b elements: 100 and 120 past the limit
        x, y = ember.randn(b, 16).cuda(), ember.randn(b, 16).cuda()
        np.testing.assert_allclose(f(x, y).cpu().numpy(), fn(x, y).cpu().numpy(), rtol=1e-5,
                                   atol=1e-5)
    g = graphs[-1]
    assert len(graphs) == 1 and len(g.sym_variants) == 1 and len(g.variants) == 2, \
        (len(graphs), g.sym_variants, g.variants)
    (sym,) = g.sym_variants.values()
    assert WIDE not in sym.kernel_src, sym.kernel_src   # the int32 kernels serve 8, 40 and 9
    assert all(WIDE in v.kernel_src for v in g.variants.values())  # 100 and 120: per size, int64
finally:   # (on a GPU this runs in the test process)
    index64.LIMIT = saved
    if cache is None:
        del os.environ["EMBER_FX_GRAPH_CACHE"]
    else:
        os.environ["EMBER_FX_GRAPH_CACHE"] = cache
"""


def test_compiled_graphs_past_the_limit_take_int64_kernels():
    run_script(SCRIPT, "inductor_index64")
