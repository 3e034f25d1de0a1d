"""Tensor subclasses used by tracing (`ember._subclasses.fake_tensor`), as torch._subclasses."""
