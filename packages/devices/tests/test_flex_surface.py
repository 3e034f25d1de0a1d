"""ember.cuda's FlexAttention kernels use core's documented surface for device backends
(`ember.nn.attention.backend_api`), never core's private `_modexpr` / `_fused` modules."""
import ast
import os

import ember.nn.attention.backend_api as api

CUDA = os.path.join(os.path.dirname(__file__), "..", "src", "ember", "cuda")


def _imports(path):
    tree = ast.parse(open(path).read())
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module:
            yield from (f"{n.module}.{a.name}" for a in n.names)
        elif isinstance(n, ast.Import):
            yield from (a.name for a in n.names)


def test_flex_kernels_import_only_the_backend_surface():
    for name in ("_flex.py", "_flex_bwd.py"):
        used = [m for m in _imports(os.path.join(CUDA, name)) if m.startswith("ember.nn.attention")]
        assert used == ["ember.nn.attention.backend_api"], (name, used)


def test_backend_api_names_are_documented():
    assert set(api.__all__) == {"Unsupported", "trace", "to_triton", "run", "delta", "reduce_kv"}
    for n in api.__all__:
        assert f"`{n}" in api.__doc__, n
        assert getattr(api, n).__doc__, n
