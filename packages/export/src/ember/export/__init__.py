"""ember.export: ExportedProgram, save/load, ahead-of-time compilation (placeholder).

Ships in ember-export, which registers itself with core through `_component.register`.
"""

__all__: list[str] = []
