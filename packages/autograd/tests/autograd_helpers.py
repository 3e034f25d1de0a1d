"""Helpers shared by the autograd tests."""
import ember


class Square(ember.autograd.Function):
    """x * x as a custom Function saving its input; backward 2 * g * x: right for real inputs,
    missing the conjugate for complex ones (gradcheck must catch it)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * g * x
