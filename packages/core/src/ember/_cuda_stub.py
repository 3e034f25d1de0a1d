"""`ember.cuda` when ember-devices is not installed: queries answer 'no GPU', the rest names it."""


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def __getattr__(name):
    if name == "amp":  # torch.cuda.amp's deprecated aliases work (disabled) without a GPU
        from .amp import _cuda_amp
        return _cuda_amp
    from ._components import MissingComponentError
    raise MissingComponentError(f"ember.cuda.{name} needs the ember-devices component, which is "
                                "not installed: pip install ember-devices")
