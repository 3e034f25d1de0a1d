"""The CUDA runtime under ember.cuda: the driver and its contexts (`driver`), streams and events
(`streams`), the caching allocator (`allocator`), and Triton's driver without torch plus the
cheap launcher of compiled kernels (`launcher`). No op knowledge lives here."""
