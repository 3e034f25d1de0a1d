"""Shared by the worker scripts: `@check(rank)` runs a check now and prints
`CHECK <rank> <name> OK|FAIL <message>` (a failure ends the whole mpiexec job: the failed check
skipped some of its collectives, so the ranks' next ones would not match and could only hang);
`finish(rank)` prints the summary and exits 1 on a failure (mpi_launch.py reads both)."""
import sys
import traceback

FAILED = []


def check(rank):
    def run(fn):
        try:
            fn()
            print(f"CHECK {rank} {fn.__name__} OK", flush=True)
        except Exception as e:
            FAILED.append(fn.__name__)
            msg = "".join(traceback.format_exception_only(type(e), e)).strip()
            print(f"CHECK {rank} {fn.__name__} FAIL {msg.replace(chr(10), ' | ')}", flush=True)
            traceback.print_exc()
            from ember.distributed._mpi import abort_job
            abort_job(1)
        return fn
    return run


def finish(rank):
    import ember.distributed as dist
    if dist.is_initialized():
        dist.destroy_process_group()
    print(f"DONE {rank} failed={FAILED}", flush=True)
    sys.exit(1 if FAILED else 0)
