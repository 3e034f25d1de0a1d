"""Thread-local state shared by dispatch: grad mode, the mode stack, the default-device stack."""
import threading


class _State(threading.local):
    def __init__(self):
        self.grad_enabled = True
        self.inference = False
        self.modes = []          # dispatch modes, innermost last (tracing, fake tensors, ...)
        self.device_stack = []   # `with ember.device(...)` defaults for factory functions
        self.default_device = None   # ember.set_default_device (thread-local, as torch's)
        self.autocast = {}       # device type -> low-precision dtype, inside `ember.autocast`


state = _State()
