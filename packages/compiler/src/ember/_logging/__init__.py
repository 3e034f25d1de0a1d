"""`ember._logging.set_logs(graph_breaks=True, recompiles=True, guards=True, graph_code=True,
dynamic=True)`: what `EMBER_LOGS=graph_breaks,recompiles,guards,graph_code,dynamic` turns on
(torch._logging's API)."""
from __future__ import annotations

__all__ = ["set_logs"]


def set_logs(*, graph_breaks: bool = False, recompiles: bool = False, guards: bool = False,
             graph_code: bool = False, cudagraphs: bool = False, output_code: bool = False,
             dynamic=None, **others) -> None:
    """Turn the named capture artifacts on (all others off); `dynamic` (any true value, as
    PyTorch's log level): symbols created for dynamic sizes."""
    from ember._dynamo import _logs
    unknown = [k for k in others if k not in ("dynamo", "aot", "inductor")]
    if unknown:
        raise ValueError(f"Unrecognized log or artifact name passed to set_logs: {unknown[0]}")
    flags = dict(graph_breaks=graph_breaks, recompiles=recompiles, guards=guards,
                 graph_code=graph_code, cudagraphs=cudagraphs, output_code=output_code,
                 dynamic=bool(dynamic))
    _logs.set_artifacts([k for k, v in flags.items() if v])
