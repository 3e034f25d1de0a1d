"""ember.compile inlines generator expressions, generator functions and list / dict / set
comprehensions as PyTorch's dynamo does: one graph (fullgraph), no break, values equal eager.
Before, a generator expression broke the graph (the GPT block's `(t.view(...) for t in (q, k, v))`
ran its whole forward eagerly)."""
import math

import pytest
from compile_helpers import Counter, _reset, close  # noqa: F401  (_reset: autouse)

import ember
import ember._dynamo as dynamo
import ember.nn as nn
import ember.nn.functional as F

X = ember.randn(4, 6)


def _gen(xs):
    for t in xs:
        yield t + 1


CASES = {
    "genexpr_unpacked": lambda x: [a * b for a, b in [tuple(t * 2 for t in x.split(3, 1))]],
    "genexpr_into_tuple": lambda x: tuple(t.relu() for t in (x, x - 1)),
    "genexpr_sum": lambda x: sum(t * i for i, t in enumerate((x, x.sin(), x.cos()))),
    "genexpr_any_on_sizes": lambda x: x * 2 if any(s == 6 for s in x.shape) else x,
    "genexpr_into_cat": lambda x: ember.cat(tuple(t.exp() for t in x.chunk(2)), 0),
    "genexpr_max_of_sizes": lambda x: x.reshape(max(s for s in x.shape), -1),
    "generator_function": lambda x: list(_gen([x, x * 3])),
    "listcomp_filtered": lambda x: [t * 2 for i, t in enumerate((x, x + 1, x + 2)) if i != 1],
    "listcomp_nested": lambda x: [[t * j for j in range(2)] for t in (x, x.tanh())],
    "dictcomp": lambda x: {f"k{i}": t.abs() for i, t in enumerate(x.unbind(0))},
    "setcomp_of_sizes": lambda x: (x * len({s % 4 for s in x.shape}), {s * 2 for s in x.shape}),
    "set_of_sizes": lambda x: x * len(set(x.shape)) + len(set()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_comprehension_captured_in_one_graph(name):
    fn = CASES[name]
    be = Counter()
    got = ember.compile(fn, backend=be, fullgraph=True)(X)
    close(got, fn(X))
    assert len(be.graphs) == 1
    assert dynamo.explain(fn)(X).break_reasons == []


def test_set_methods_and_membership():
    def f(x):
        s = {d for d in x.shape}
        s.add(7)
        s.discard(4)
        u = s | {9}
        return x * len(s) + sum(sorted(u)), s, 6 in s, 4 in s

    be = Counter()
    got = ember.compile(f, backend=be, fullgraph=True)(X)
    close(got, f(X))
    assert len(be.graphs) == 1
    got[1].add(100)   # a fresh set each call (not the traced one)
    assert ember.compile(f, backend=be, fullgraph=True)(X)[1] == {6, 7}


def test_set_of_tensors_breaks_with_a_reason():
    reasons = dynamo.explain(lambda x: len({x, x + 1}))(X).break_reasons
    assert reasons and "Tensor in a set" in reasons[0].reason


class Attention(nn.Module):
    """The GPT block's attention (test_inductor_cuda_gpt.py): q, k, v by a generator
    expression."""

    def __init__(self, c=8, h=2):
        super().__init__()
        self.c, self.h = c, h
        self.qkv = nn.Linear(c, 3 * c)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        att = F.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1))), dim=-1)
        return (att @ v).transpose(1, 2).contiguous().view(B, T, C)


def test_gpt_attention_generator_expression_compiles():
    ember.manual_seed(0)
    m = Attention()
    x = ember.randn(2, 5, 8, requires_grad=True)
    be = Counter()
    got = ember.compile(m, backend=be, fullgraph=True)(x)
    close(got, m(x))
    (g,) = be.graphs
    ops = [str(n.target) for n in g.graph.nodes if n.op == "call_function"]
    # the generator expression's three views and transposes are in the graph, with the rest
    assert ops.count("<OpDef view>") == 4 and ops.count("<OpDef softmax>") == 1, ops
    assert dynamo.explain(m)(x).break_reasons == []


def test_endless_generator_breaks_with_a_reason():
    def count():
        i = 0
        while True:
            yield i
            i += 1

    def f(x):
        return [x * i for _, i in zip(range(3), count())]
    reasons = dynamo.explain(f)(X).break_reasons
    assert reasons and "endless" in reasons[0].reason
    close(ember.compile(f, backend="eager")(X), f(X))
