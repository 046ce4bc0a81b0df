"""The variable-tracker base class and the errors tracing raises."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from dynajit.capture._frame import Unsupported

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.paths import Path
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = [
    "VT",
    "AttributeMissing",
    "NullVar",
    "RaisesInPython",
    "attribute_missing",
    "raises_in_python",
    "unsupported",
]


def unsupported(reason: str) -> NoReturn:
    """Stop tracing here: a graph break (or an error under fullgraph) with ``reason``."""
    raise Unsupported(reason)


class RaisesInPython(Unsupported):
    """A step that raises when run: Python raises the same error itself, so even fullgraph runs it there."""

    exception: BaseException | None = None  # the exception raised, when known exactly (traced code may catch it)


def raises_in_python(reason: str, exception: BaseException | None = None) -> NoReturn:
    """Stop tracing before a step that raises ``reason``'s error when Python runs it (``exception``, if known)."""
    error = RaisesInPython(reason)
    error.exception = exception
    raise error


class AttributeMissing(RaisesInPython):
    """Reading an attribute raises AttributeError, and the absence is a guarded fact of the trace.

    ``getattr(obj, name, default)`` and ``hasattr`` catch exactly this: the default (or False) is then
    right for every call the entry accepts.
    """


def attribute_missing(tx: Tracer, path: Path | None, name: str, reason: str) -> NoReturn:
    """Raise :class:`AttributeMissing` for attribute ``name`` of the object at ``path``, guarding its absence.

    Call it only when that object really lacks ``name`` (so the guard holds now). Without a path the
    absence must need no guard (a constant, or an object made while tracing whose class is guarded).
    """
    if path is not None:
        tx.output.guard("hasattr_match", path, name, False)
    raise AttributeMissing(f"{reason} (AttributeError)")


class VT:
    """An abstract value. ``source`` says how to reach the real value from the frame, when it came from there."""

    source: Path | None = None

    def python_type(self) -> type:
        unsupported(f"the type of {self} is not known while tracing")

    def is_const(self) -> bool:
        return False

    def const(self) -> Any:
        unsupported(f"{self} is not a Python constant")

    def unpack(self, tx: Tracer) -> list[VT]:
        unsupported(f"cannot iterate over {self}")

    def truth(self, tx: Tracer) -> bool:
        unsupported(f"the truth value of {self} is not known while tracing")

    def getattr(self, tx: Tracer, name: str) -> VT:
        unsupported(f"attribute {name!r} of {self}")

    def setattr(self, tx: Tracer, name: str, value: VT) -> None:
        unsupported(f"setting attribute {name!r} on {self}")

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        unsupported(f"calling {self}")

    def call_method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        return self.getattr(tx, name).call(tx, args, kwargs)

    def reconstruct(self, cg: CodeGen) -> None:
        if self.source is None:
            unsupported(f"cannot rebuild {self} in Python after the graph")
        self.source.emit(cg)

    def reconstruct_object(self, cg: CodeGen, obj: Any) -> None:
        """Load ``obj`` from the frame when it came from there, else from a global of the transformed code."""
        if self.source is not None:
            self.source.emit(cg)
        else:
            cg.load_global(cg.stash(obj))

    def children(self) -> list[VT]:
        """The values this one contains (for finding the tensors a reconstruction needs)."""
        return []

    def __repr__(self) -> str:
        where = f" from {self.source.name()}" if self.source is not None else ""
        return f"{type(self).__name__}{where}"


class HeldVar(VT):
    """A value the interpreter holds as the real Python object: its type and its constant are that object's."""

    def __init__(self, value: Any, source: Any = None) -> None:
        self.value = value
        self.source = source

    def python_type(self) -> type:
        return type(self.value)

    def is_const(self) -> bool:
        return True

    def const(self) -> Any:
        return self.value


class NullVar(VT):
    """The NULL CPython pushes below a callable (or after it, in 3.13)."""

    def reconstruct(self, cg: CodeGen) -> None:
        cg.push_null()
