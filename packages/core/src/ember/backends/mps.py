"""`ember.backends.mps`: there is no Metal backend; these answer accordingly."""


def is_available() -> bool:
    return False


def is_built() -> bool:
    return False
