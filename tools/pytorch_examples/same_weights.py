"""Compare two FSDP2-example checkpoints (full state dicts saved by rank 0 with torch.save):
`python same_weights.py DIR_A DIR_B` loads the newest model checkpoint under each
`DIR/checkpoints/dtensor_api/<time>/` with ember.load (weights_only) and reports the largest
difference per tensor; exit status 1 when a tensor differs beyond float32 tolerance."""
import os
import sys

import ember


def newest_model(root):
    base = os.path.join(root, "checkpoints", "dtensor_api")
    newest = max(os.listdir(base), key=int)
    folder = os.path.join(base, newest)
    name = next(n for n in os.listdir(folder) if n.startswith("model"))
    return ember.load(os.path.join(folder, name), weights_only=True)


def main(a, b):
    sa, sb = newest_model(a), newest_model(b)
    if sorted(sa) != sorted(sb):
        print(f"different keys: {sorted(set(sa) ^ set(sb))}")
        return 1
    worst, bad = 0.0, []
    for key in sorted(sa):
        x, y = sa[key].float(), sb[key].float()
        diff = (x - y).abs().max().item()
        worst = max(worst, diff)
        if not ember.allclose(x, y, rtol=1e-3, atol=1e-4):
            bad.append(f"{key}: max abs diff {diff:.3g}")
    print(f"{len(sa)} tensors, largest abs difference {worst:.3g}")
    for line in bad:
        print("  differs:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
