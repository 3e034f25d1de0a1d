"""`ember.backends.cudnn`: accepted for compatibility; ember's CUDA convs do not use cuDNN."""
enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    return False


def version():
    return None
