"""ember-distributed: the component registers with core, and without it core names the wheel."""
from component_checks import component_tests

globals().update(component_tests('distributed', 'ember.distributed', 'ember.distributed'))


def test_distributed_reports_not_initialized():
    import ember.distributed as dist

    assert dist.is_available() is True
    assert dist.is_initialized() is False
