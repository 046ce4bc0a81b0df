"""Which functions interception leaves alone: library code (torch, dynajit, the standard library) and the like.

User code is everything else, including third-party packages in
site-packages: those are compiled like the user's own functions. So are
torch's module containers (``nn.Sequential``, ``nn.ModuleList``, ...), whose
methods call the user's modules: a graph break inside one of those modules
then cuts the container's frame, not the whole container call. A resume
function (marked with :data:`RESUME_MARK`) is always compiled: it continues a
frame being compiled.
"""

from __future__ import annotations

import inspect
import os
import sysconfig
import types

import torch

__all__ = ["RESUME_MARK", "is_library_code", "is_untraceable_code"]

RESUME_MARK = "_dynajit_resume"  # in a resume function's __dict__

_NOT_FRAMES = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def _directory(path: str) -> str:
    return os.path.join(os.path.realpath(path), "")


def _library_roots() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    import dynajit  # the namespace package: one path per installed distribution

    paths = sysconfig.get_paths()
    libraries = (os.path.dirname(torch.__file__), *dynajit.__path__)
    stdlib = (paths["stdlib"], paths["platstdlib"])
    site = (paths["purelib"], paths["platlib"])
    return tuple(map(_directory, libraries)), tuple(map(_directory, stdlib)), tuple(map(_directory, site))


_LIBRARIES, _STDLIB, _SITE_PACKAGES = _library_roots()
_CALLS_USER_CODE = (os.path.realpath(torch.nn.modules.container.__file__),)
_by_filename: dict[str, bool] = {}


def _classify(filename: str) -> bool:
    if filename.startswith("<"):
        return filename.startswith("<frozen")  # "<string>", "<stdin>" and notebooks are user code
    path = os.path.realpath(filename)
    if path in _CALLS_USER_CODE:
        return False
    if path.startswith(_LIBRARIES):
        return True
    # site-packages may live inside the standard library's folder; third-party code there is user code
    return path.startswith(_STDLIB) and not path.startswith(_SITE_PACKAGES)


def is_library_code(code: types.CodeType) -> bool:
    """True for code from torch, dynajit or the standard library (never intercepted)."""
    filename = code.co_filename
    known = _by_filename.get(filename)
    if known is None:
        known = _by_filename[filename] = _classify(filename)
    return known


def is_untraceable_code(code: types.CodeType) -> bool:
    """True for generator and coroutine functions, whose frames are not converted."""
    return bool(code.co_flags & _NOT_FRAMES)
