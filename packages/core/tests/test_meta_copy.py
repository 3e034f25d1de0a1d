"""Copying out of a meta tensor (it has no data) raises PyTorch's NotImplementedError, for
copy_, .to() and .cpu() alike; copies into a meta tensor only check sizes (as torch)."""
import pytest
import torch

import ember

CASES = {
    "copy_ into cpu": lambda T: T.zeros(3).copy_(T.empty(3, device="meta")),
    "to cpu": lambda T: T.empty(3, device="meta").to("cpu"),
    "cpu()": lambda T: T.empty(2, 2, device="meta").cpu(),
    "to cpu and float64": lambda T: T.empty(3, device="meta").to("cpu", T.float64),
    "tolist": lambda T: T.empty(3, device="meta").tolist(),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_copy_out_of_meta_raises(name):
    for T in (torch, ember):
        with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
            CASES[name](T)


def test_copy_into_meta_checks_sizes_only():
    for T in (torch, ember):
        r = T.empty(3, device="meta").copy_(T.zeros(3))
        assert r.device.type == "meta" and tuple(r.shape) == (3,)
        with pytest.raises(RuntimeError):
            T.empty(3, device="meta").copy_(T.zeros(4))
