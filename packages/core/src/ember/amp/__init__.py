"""`ember.amp`: automatic mixed precision (autocast) and gradient scaling."""
from .autocast_mode import autocast, get_autocast_dtype, is_autocast_available
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "get_autocast_dtype", "is_autocast_available"]
