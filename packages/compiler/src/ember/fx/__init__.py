"""ember.fx: ember's graph IR (placeholder; the compiler issue writes Graph, Node, Interpreter).

Ships in ember-compiler.
"""

__all__: list[str] = []
