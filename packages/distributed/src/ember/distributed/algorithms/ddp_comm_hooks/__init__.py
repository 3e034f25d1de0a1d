"""DDP communication hooks: `model.register_comm_hook(state, hook)`; see default_hooks."""
from . import default_hooks

__all__ = ["default_hooks"]
