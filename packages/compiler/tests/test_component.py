"""ember-compiler: the component registers with core, and without it core names the wheel."""
from component_checks import component_tests

globals().update(component_tests('compiler', 'ember.compiler', 'ember.compile'))


def test_fx_ships_in_this_wheel():
    import os

    import ember.compiler
    import ember.fx

    # ember.fx comes from the same source folder (or install) as ember.compiler
    assert os.path.dirname(os.path.dirname(ember.fx.__file__)) == \
        os.path.dirname(os.path.dirname(ember.compiler.__file__))
    assert isinstance(ember.fx.__all__, list)
