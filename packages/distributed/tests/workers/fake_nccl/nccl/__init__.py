"""A stand-in for nccl4py (tests only): see bindings/nccl.py."""
