"""tools/depgraph.py: the real tree keeps design.md's layering; bad arrows are caught."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.getcwd(), "tools"))
import depgraph  # noqa: E402


def _tree(tmp_path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(tmp_path)


def test_repository_layering_holds():
    # Under Bazel the cwd is the runfiles root: every package's sources are there.
    assert os.path.isdir("packages/core/src/ember")
    assert depgraph.main(["--root", "."]) == 0


@pytest.mark.parametrize(
    "rel, source",
    [
        ("packages/core/src/ember/_x.py", "import ember.autograd\n"),
        ("packages/core/src/ember/_x.py", "def f():\n    import torch\n"),
        ("packages/core/src/ember/nn/_x.py", "from ...optim import SGD\n"),
        ("packages/core/src/ember/_x.py", "from ember import cuda\n"),
        ("packages/core/src/ember/_x.py", "import torch\n"),
        ("packages/autograd/src/ember/autograd/_x.py", "import ember.compiler\n"),
        ("packages/autograd/src/ember/autograd/_x.py", "import sympy\n"),
        ("packages/compiler/src/ember/compiler/_x.py", "import ember.cuda\n"),
        ("packages/stable_abi/src/ember_abi/_x.py", "import numpy\n"),
    ],
)
def test_bad_arrow_fails(tmp_path, rel, source):
    root = _tree(tmp_path, {rel: source})
    assert depgraph.main(["--root", root, "--baseline", os.devnull]) == 1


@pytest.mark.parametrize(
    "rel, source",
    [
        ("packages/core/src/ember/_x.py", "import numpy, ml_dtypes, os\nfrom . import _y\n"),
        ("packages/autograd/src/ember/autograd/_x.py", "from ember._components import require\n"),
        ("packages/autograd/src/ember/autograd/_x.py", "import numpy  # through core\n"),
        (
            "packages/compiler/src/ember/compiler/_x.py",
            "try:\n    import ember.cuda\nexcept ImportError:\n    pass\n",
        ),
        ("packages/compiler/src/ember/compiler/_x.py", "def f():\n    import ember.cuda\n"),
        # lazy sibling import: a warning (design.md: "never ... at import time")
        ("packages/core/src/ember/_x.py", "def f():\n    from ember.autograd import grad\n"),
        (
            "packages/core/src/ember/_x.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import ember.autograd\n",
        ),
    ],
)
def test_allowed_arrow_passes(tmp_path, rel, source):
    root = _tree(tmp_path, {rel: source})
    assert depgraph.main(["--root", root, "--baseline", os.devnull]) == 0
