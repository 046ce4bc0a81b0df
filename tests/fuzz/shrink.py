"""Minimising a failing program: greedy edits kept while the program still fails the same way.

Edits, tried in order and repeated until none applies: fewer calls, dropped
statements (anywhere in the tree: branches, loop bodies, helpers), a compound
statement replaced by one of its bodies, simpler right-hand sides, fewer
returned values, smaller sizes, float32 contiguous arguments. "The same way"
is the same backend, the same check and the same exception type (and, for a
raised error or a fallback, the same normalised message).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

from .program import Program, Stmt
from .runner import Failure, check, normalise, run_eager

Path = tuple[int, ...]


def _same(failure: Failure, target: Failure) -> bool:
    if failure.signature != target.signature:
        return False
    if target.kind in ("raised", "fallback", "harness"):
        return normalise(failure.detail)[:60] == normalise(target.detail)[:60]
    return True


def _bodies(program: Program) -> list[list[Stmt]]:
    """The top-level statement lists: each helper, then ``fn``'s body."""
    return [*program.helpers, program.body]


def _walk(body: list[Stmt], path: Path) -> Iterator[tuple[Path, Stmt]]:
    for i, stmt in enumerate(body):
        yield (*path, i), stmt
        for j, (_, inner) in enumerate(stmt.clauses):
            yield from _walk(inner, (*path, i, j))


def _locate(program: Program, path: Path) -> tuple[list[Stmt], int]:
    body = _bodies(program)[path[0]]
    rest = path[1:]
    while len(rest) > 1:
        body = body[rest[0]].clauses[rest[1]][1]
        rest = rest[2:]
    return body, rest[0]


def _edits(program: Program) -> Iterator[Program]:
    """Candidate simplifications of ``program``, most reducing first."""
    if len(program.calls) > 1:
        for i in range(len(program.calls)):
            p = program.copy()
            del p.calls[i]
            for arg in p.args:
                if arg.kind == "int":
                    del arg.int_values[i]
                if arg.shared:
                    del arg.shared[i]
            yield p
    for h in range(len(program.helpers)):
        p = program.copy()
        del p.helpers[h]
        yield p
    paths = [path for top, body in enumerate(_bodies(program)) for path, _ in _walk(body, (top,))]
    for path in paths:
        _, stmt = _locate_stmt(program, path)
        for replacement in [[], *stmt.alts]:
            p = program.copy()
            body, index = _locate(p, path)
            body[index : index + 1] = [s for s in _copy(replacement)]
            yield p
    yield from _inline_aliases(program)
    if len(program.returns) > 1:
        for i in range(len(program.returns)):
            p = program.copy()
            del p.returns[i]
            yield p
    if program.returns:
        p = program.copy()
        p.returns = []
        yield p
    for i in range(len(program.args)):
        p = program.copy()
        del p.args[i]
        yield p
    if program.return_style != "single" and len(program.returns) == 1:
        p = program.copy()
        p.return_style = "single"
        yield p
    yield from _size_edits(program)
    for i, arg in enumerate(program.args):
        if arg.kind == "tensor" and arg.layout != "contiguous":
            p = program.copy()
            p.args[i].layout = "contiguous"
            yield p
        if arg.kind == "tensor" and arg.dtype != "float32":
            p = program.copy()
            p.args[i].dtype = "float32"
            yield p


def _inline_aliases(program: Program) -> Iterator[Program]:
    """``a = b`` in ``fn``'s body dropped, with ``a`` renamed ``b`` from there on (alias chains collapse)."""
    for i, stmt in enumerate(program.body):
        match = re.fullmatch(r"(\w+) = (\w+)", stmt.lines[0]) if len(stmt.lines) == 1 and not stmt.clauses else None
        if match is None:
            continue
        alias, name = match.groups()
        pattern = re.compile(rf"\b{alias}\b")
        p = program.copy()
        del p.body[i]
        for later in p.body[i:]:
            _rename(later, pattern, name)
        p.returns = [pattern.sub(name, r) for r in p.returns]
        yield p


def _rename(stmt: Stmt, pattern: re.Pattern[str], name: str) -> None:
    stmt.lines = [pattern.sub(name, line) for line in stmt.lines]
    stmt.clauses = [(pattern.sub(name, header), body) for header, body in stmt.clauses]
    for _, body in stmt.clauses:
        for inner in body:
            _rename(inner, pattern, name)
    for alt in stmt.alts:
        for inner in alt:
            _rename(inner, pattern, name)


def _size_edits(program: Program) -> Iterator[Program]:
    for c, sizes in enumerate(program.calls):
        for sym, value in sizes.items():
            for smaller in (2, 1, value - 1):
                if 0 <= smaller < value:
                    p = program.copy()
                    p.calls[c][sym] = smaller
                    yield p
    for i, arg in enumerate(program.args):
        for d, dim in enumerate(arg.dims):
            if isinstance(dim, int) and dim > 1:
                p = program.copy()
                p.args[i].dims[d] = dim - 1
                yield p


def _locate_stmt(program: Program, path: Path) -> tuple[list[Stmt], Stmt]:
    body, index = _locate(program, path)
    return body, body[index]


def _copy(stmts: list[Stmt]) -> list[Stmt]:
    return Program(seed="", args=[], calls=[], body=stmts).copy().body


def shrink(
    program: Program,
    failure: Failure,
    budget_seconds: float = 300.0,
    log: Callable[[str], None] | None = None,
) -> tuple[Program, Failure]:
    """The smallest program found within the budget that still fails like ``failure``, and its failure."""
    deadline = time.monotonic() + budget_seconds
    current, current_failure = program.copy(), failure
    allowed = _eager_errors(program)
    # Calls after the failing one cannot matter.
    if failure.call >= 0 and failure.call + 1 < len(current.calls):
        trial = current.copy()
        trial.calls = trial.calls[: failure.call + 1]
        for arg in trial.args:
            if arg.kind == "int":
                arg.int_values = arg.int_values[: failure.call + 1]
            arg.shared = arg.shared[: failure.call + 1]
        found = _fails(trial, failure, allowed)
        if found:
            current, current_failure = trial, found
    attempts = 0
    start = 0  # after a kept edit, resume at the same position: earlier edits were just rejected
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for index, candidate in enumerate(_edits(current)):
            if index < start:
                continue
            if time.monotonic() > deadline:
                break
            attempts += 1
            found = _fails(candidate, failure, allowed)
            if found:
                current, current_failure = candidate, found
                progress, start = True, index
                if log:
                    log(f"  shrink: {len(current.source())} chars after {attempts} attempts")
                break
        else:
            if start:  # one more full pass: an earlier edit may apply now
                start, progress = 0, True
    return current, current_failure


def _eager_errors(program: Program) -> set[str]:
    return {
        type(error).__name__
        for _, _, error, _, _, _ in run_eager(program.source(), len(program.calls), "shrink")
        if error
    }


def _fails(program: Program, target: Failure, allowed: set[str]) -> Failure | None:
    # A candidate must not raise eagerly where the original did not (a dropped definition: NameError).
    if not _eager_errors(program) <= allowed:
        return None
    for failure in check(program, backends=(target.backend,), tag="shrink"):
        if _same(failure, target):
            return failure
    return None
