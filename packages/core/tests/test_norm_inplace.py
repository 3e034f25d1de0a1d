"""Norm layers followed by in-place ops (ReLU(inplace=True), `out += shortcut`), as in every
ResNet: the norms' backward keeps their statistics, not their result, so writing the result in
place leaves the graph valid; forward, running stats and gradients against torch."""
import pytest
from test_nn_layers import run


def _resnet_block(t):
    nn = t.nn

    class BasicBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(4)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(4)
            self.downsample = nn.Sequential(nn.Conv2d(3, 4, 1, bias=False), nn.BatchNorm2d(4))

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += self.downsample(x)
            return self.relu(out)

    return BasicBlock()


MODELS = {
    "resnet_block": (_resnet_block, [(2, 3, 5, 5)]),
    "conv_bn2d_relu": (lambda t: t.nn.Sequential(t.nn.Conv2d(3, 4, 3), t.nn.BatchNorm2d(4),
                                                 t.nn.ReLU(inplace=True)), [(2, 3, 5, 5)]),
    "linear_bn1d_relu": (lambda t: t.nn.Sequential(t.nn.Linear(5, 4), t.nn.BatchNorm1d(4),
                                                   t.nn.ReLU(inplace=True)), [(6, 5)]),
    "bn1d_3d_input": (lambda t: t.nn.Sequential(t.nn.BatchNorm1d(3), t.nn.ReLU(inplace=True)),
                      [(4, 3, 5)]),
    "layernorm_relu": (lambda t: t.nn.Sequential(t.nn.Linear(5, 4), t.nn.LayerNorm(4),
                                                 t.nn.ReLU(inplace=True)), [(6, 5)]),
    "groupnorm_relu": (lambda t: t.nn.Sequential(t.nn.Conv2d(3, 4, 3), t.nn.GroupNorm(2, 4),
                                                 t.nn.ReLU(inplace=True)), [(2, 3, 5, 5)]),
}


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_norm_then_inplace_forward_backward(name, train):
    ctor, specs = MODELS[name]
    run(ctor, specs, train=train, rtol=1e-6, atol=1e-7)
