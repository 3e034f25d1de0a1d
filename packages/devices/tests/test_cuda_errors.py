"""The op database's error records (core's opdb_errors.py: calls PyTorch rejects for their ranks,
shapes, dtypes or argument values) on cuda: each raises the exception type it raises on the CPU,
from the entry's meta or the kernel's own argument handling, never by running the CPU kernel on
host copies to find the error (a device restates no check and bounces no call for its error).

Without a GPU the script runs on the fake device (host memory + Triton's interpreter) in a
subprocess, as the other family scripts.
"""
from cuda_script import run_script

SCRIPT = r"""
import os, sys
import ember
from ember._device import get_backend
sys.path.insert(0, os.path.join(os.path.dirname(ember.__file__), "..", "..", "tests"))
from opdb import Samples
from opdb_errors import ERRORS
from test_op_table import _convert, _op

be = get_backend("cuda")
bounced = []
host_call = be.host_call
def spy(op, args, count=True):
    bounced.append(op.qualname)
    return host_call(op, args, count)
be.host_call = spy

def call(rec, args, device):
    a = [_convert(x, ember, rec.dtype, device) for x in args]
    kw = {k: _convert(v, ember, "float32", device) for k, v in rec.kw.items()}
    return _op(rec)(*a, **kw)

bad = []
for rec in ERRORS:
    args = list(rec.sample(Samples(0)))
    try:
        call(rec, args, None)
        bad.append(f"{rec.id}: no error on the CPU")
        continue
    except Exception as e:  # noqa: BLE001
        want = type(e)
    del bounced[:]
    try:
        call(rec, args, "cuda")
        bad.append(f"{rec.id}: no error on cuda (the CPU raises {want.__name__})")
    except Exception as e:  # noqa: BLE001
        if type(e) is not want:
            bad.append(f"{rec.id}: cuda raised {type(e).__name__} ({e}), the CPU {want.__name__}")
    if bounced:
        bad.append(f"{rec.id}: found its error on host copies ({bounced})")
assert not bad, "\n".join(bad)
print("OK", len(ERRORS))
"""


def test_error_records_on_cuda():
    run_script(SCRIPT, "test_cuda_errors", timeout=600)
