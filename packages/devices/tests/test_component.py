"""ember-devices: the component registers with core, and without it core names the wheel."""
from component_checks import component_tests

globals().update(component_tests('devices', 'ember.cuda', 'device=cuda'))


def test_no_gpu_without_cuda_bindings():
    import importlib.util

    import ember.cuda

    assert isinstance(ember.cuda.is_available(), bool)
    if importlib.util.find_spec("cuda") is None:
        assert ember.cuda.is_available() is False
        assert ember.cuda.device_count() == 0
