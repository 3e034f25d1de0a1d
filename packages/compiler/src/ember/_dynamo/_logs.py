"""EMBER_LOGS artifacts of the capture (graph_breaks, recompiles, guards, graph_code), printed
through the `ember._dynamo` logger as TORCH_LOGS prints them."""
from __future__ import annotations

import logging
import os
import sys

__all__ = ["ARTIFACTS", "enabled", "set_artifacts", "emit"]

ARTIFACTS = ("graph_breaks", "recompiles", "guards", "graph_code", "cudagraphs",
             "output_code", "dynamic")
enabled: set = set()
log = logging.getLogger("ember._dynamo")
_handler = [None]


def set_artifacts(names) -> None:
    enabled.clear()
    enabled.update(names)
    if enabled and _handler[0] is None:
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        log.addHandler(h)
        _handler[0] = h
    log.setLevel(logging.INFO if enabled else logging.WARNING)


def emit(artifact: str, msg: str) -> None:
    if artifact in enabled:
        logging.getLogger(f"ember._dynamo.{artifact}").info(msg)


def _from_env() -> None:
    spec = os.environ.get("EMBER_LOGS", "")
    names = [s.strip().lstrip("+") for s in spec.split(",") if s.strip()]
    bad = [n for n in names if n not in ARTIFACTS]
    if bad:
        import warnings
        warnings.warn(f"EMBER_LOGS: unknown artifact(s) {bad}; known: {list(ARTIFACTS)}",
                      stacklevel=2)
        names = [n for n in names if n in ARTIFACTS]
    if names:
        set_artifacts(names)


_from_env()
