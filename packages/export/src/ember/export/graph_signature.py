"""The signature of an exported graph, as torch.export.graph_signature: which placeholders are
parameters, buffers, constants or user inputs, and which outputs are user outputs or buffer
mutations."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

__all__ = ["InputKind", "OutputKind", "InputSpec", "OutputSpec", "TensorArgument",
           "ConstantArgument", "SymIntArgument", "ExportGraphSignature"]


class InputKind(Enum):
    USER_INPUT = auto()
    PARAMETER = auto()
    BUFFER = auto()
    CONSTANT_TENSOR = auto()
    CUSTOM_OBJ = auto()
    TOKEN = auto()


class OutputKind(Enum):
    USER_OUTPUT = auto()
    LOSS_OUTPUT = auto()
    BUFFER_MUTATION = auto()
    GRADIENT_TO_PARAMETER = auto()
    GRADIENT_TO_USER_INPUT = auto()
    USER_INPUT_MUTATION = auto()
    TOKEN = auto()
    PARAMETER_MUTATION = auto()


@dataclass
class TensorArgument:
    name: str


@dataclass
class SymIntArgument:
    name: str


@dataclass
class ConstantArgument:
    name: str
    value: Any


@dataclass
class InputSpec:
    kind: InputKind
    arg: Any
    target: str | None
    persistent: bool | None = None

    def __str__(self) -> str:
        s = f"{self.arg.name}: {self.kind.name}"
        if self.target is not None:
            s += f" target='{self.target}'"
        if self.persistent is not None:
            s += f" persistent={self.persistent}"
        return s


@dataclass
class OutputSpec:
    kind: OutputKind
    arg: Any
    target: str | None

    def __str__(self) -> str:
        s = f"{self.arg.name}: {self.kind.name}"
        return s if self.target is None else s + f" target='{self.target}'"


@dataclass
class ExportGraphSignature:
    """Placeholders in order: parameters, buffers, constants, then user inputs (as PyTorch)."""
    input_specs: list
    output_specs: list

    def _inputs(self, kind):
        return [s for s in self.input_specs if s.kind == kind]

    @property
    def parameters(self) -> list[str]:
        return [s.target for s in self._inputs(InputKind.PARAMETER)]

    @property
    def buffers(self) -> list[str]:
        return [s.target for s in self._inputs(InputKind.BUFFER)]

    @property
    def non_persistent_buffers(self) -> list[str]:
        return [s.target for s in self._inputs(InputKind.BUFFER) if s.persistent is False]

    @property
    def lifted_tensor_constants(self) -> list[str]:
        return [s.target for s in self._inputs(InputKind.CONSTANT_TENSOR)]

    @property
    def user_inputs(self) -> list:
        return [s.arg.name if hasattr(s.arg, "name") else s.arg.value
                for s in self._inputs(InputKind.USER_INPUT)]

    @property
    def user_outputs(self) -> list:
        return [s.arg.name if hasattr(s.arg, "name") else s.arg.value
                for s in self.output_specs if s.kind == OutputKind.USER_OUTPUT]

    @property
    def inputs_to_parameters(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self._inputs(InputKind.PARAMETER)}

    @property
    def inputs_to_buffers(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self._inputs(InputKind.BUFFER)}

    @property
    def inputs_to_lifted_tensor_constants(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self._inputs(InputKind.CONSTANT_TENSOR)}

    @property
    def buffers_to_mutate(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self.output_specs
                if s.kind == OutputKind.BUFFER_MUTATION}

    @property
    def user_inputs_to_mutate(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self.output_specs
                if s.kind == OutputKind.USER_INPUT_MUTATION}

    def __str__(self) -> str:
        lines = ["# inputs"] + [f"{s}" for s in self.input_specs]
        lines += ["", "# outputs"] + [f"{s}" for s in self.output_specs]
        return "\n".join(lines)
