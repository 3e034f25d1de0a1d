"""ember-export: the component registers with core, and without it core names the wheel."""
from component_checks import component_tests

globals().update(component_tests('export', 'ember.export', 'ember.export'))
