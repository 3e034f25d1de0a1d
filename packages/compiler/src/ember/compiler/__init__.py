"""ember.compiler: capture, lowering and code generation behind `ember.compile` (placeholder).

Ships in ember-compiler, which registers itself with core through `_component.register`.
"""

__all__: list[str] = []
