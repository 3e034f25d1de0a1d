"""`from ember.cuda.amp import autocast, GradScaler` (the deprecated torch.cuda.amp spelling)
works with ember-devices installed, GPU or not."""
import warnings

import ember


def test_from_cuda_amp_import():
    from ember.cuda.amp import GradScaler, autocast, custom_bwd, custom_fwd
    import ember.cuda
    assert ember.cuda.amp.autocast is autocast
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = GradScaler()
        a = autocast()
    assert any(x.category is FutureWarning for x in w)
    assert s.is_enabled() == ember.cuda.is_available() == a.enabled

    @custom_fwd(cast_inputs=ember.float32)
    def f(x):
        return x * 2
    assert f(ember.ones(2)).tolist() == [2.0, 2.0]
    assert custom_bwd(f) is f
