"""Tensor math with `import ember as torch`: a 10-second smoke of core alone (no autograd).

The main demo is examples/train_gpt.py (`./tools/demo.sh`); this one runs with
`./tools/demo.sh examples/demo.py`.

    bazel run //examples:demo  # the same, with Bazel's hermetic Python
"""

import ember as torch

torch.manual_seed(0) if hasattr(torch, "manual_seed") else None

x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # (2, 3)
w = torch.tensor([[0.5, -1.0], [1.0, 0.0], [-0.5, 2.0]])  # (3, 2)
y = x @ w  # (2, 2)
print("x @ w =", y.tolist())
print("softmax(x @ w, dim=1) =", [[round(v, 4) for v in row] for row in y.softmax(dim=1).tolist()])
print("sum, mean:", y.sum().item(), y.mean().item())
print("dtype:", y.dtype, "shape:", tuple(y.shape))
