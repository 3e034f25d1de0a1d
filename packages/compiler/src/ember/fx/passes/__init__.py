"""Graph passes over ember.fx GraphModules (`shape_prop`, `split_module`)."""
