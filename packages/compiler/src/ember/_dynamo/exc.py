"""Exceptions of the capture (torch._dynamo.exc's names)."""


class Unsupported(RuntimeError):
    """Something the bytecode interpreter cannot capture: a graph break (raised under
    fullgraph=True with the user's file:line)."""


class RecompileError(RuntimeError):
    """A recompile under `set_stance("fail_on_recompile")`."""


class BackendCompilerFailed(RuntimeError):
    pass


class GraphBreak(Exception):
    """Internal: the interpreter stops here; `reason` and `where` (file:line) say why."""

    def __init__(self, reason: str, where: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.where = where
        self.resume = None  # set where the top frame can resume after this instruction
