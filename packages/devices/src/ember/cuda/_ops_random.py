"""GPU kernels: random ops from a counter-based (Philox) generator.

TABLE maps op qualnames to kernels `f(backend, op, *args)` (see _ops.kernel: return
NotImplemented to fall back); HOST lists the ops of this family that still run their CPU kernel on
host copies, with the reason (test_cuda_opdb.py holds the backend to it)."""
from __future__ import annotations

TABLE: dict = {}

HOST: dict[str, str] = {
    "bernoulli": "no GPU kernel yet",
    "bernoulli.p": "no GPU kernel yet",
    "bernoulli_.Tensor": "no GPU kernel yet",
    "bernoulli_.float": "no GPU kernel yet",
    "cauchy_": "no GPU kernel yet",
    "exponential_": "no GPU kernel yet",
    "geometric_": "no GPU kernel yet",
    "log_normal_": "no GPU kernel yet",
    "multinomial": "no GPU kernel yet",
    "normal.Tensor_Tensor": "no GPU kernel yet",
    "normal.Tensor_float": "no GPU kernel yet",
    "normal.float_Tensor": "no GPU kernel yet",
    "normal.float_float": "no GPU kernel yet",
    "normal_": "no GPU kernel yet",
    "poisson": "no GPU kernel yet",
    "rand": "no GPU kernel yet",
    "rand_like": "no GPU kernel yet",
    "randint": "no GPU kernel yet",
    "randint.low": "no GPU kernel yet",
    "randint_like": "no GPU kernel yet",
    "randint_like.low_dtype": "no GPU kernel yet",
    "randn": "no GPU kernel yet",
    "randn_like": "no GPU kernel yet",
    "random_": "no GPU kernel yet",
    "random_.from": "no GPU kernel yet",
    "random_.to": "no GPU kernel yet",
    "randperm": "no GPU kernel yet",
    "uniform_": "no GPU kernel yet",
}
