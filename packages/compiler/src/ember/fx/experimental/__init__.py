"""ember.fx.experimental: tracing to the op table (`proxy_tensor.make_fx`)."""
