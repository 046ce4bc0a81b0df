"""The guard machine: ``_vm.c`` built once per interpreter and compiler into a cached extension module.

A compiled guard set runs as a program of this machine when it can be built (a C compiler and the
interpreter's headers); until the build is done, and wherever it cannot be, guards run as generated Python.
The build (or the load of a cached build) starts on a thread when guards are imported, never on the caller's
time: a guard set compiled before it is done keeps its Python function.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from types import ModuleType

__all__ = ["machine_module"]

_log = logging.getLogger("dynajit.guards")
_SOURCE = Path(__file__).with_name("_vm.c")
_NAME = "dynajit_guard_machine"
_lock = threading.Lock()
_state: dict[str, object] = {}  # "module": the loaded module, "thread": the build running, "failed": why not


def _cache_dir() -> Path:
    configured = os.environ.get("DYNAJIT_GUARDS_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "dynajit" / "guards"


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc")


def _library_path(cc: str) -> Path:
    include = sysconfig.get_paths()["include"]
    key = hashlib.sha256(
        b"\0".join([_SOURCE.read_bytes(), sys.version.encode(), include.encode(), cc.encode()])
    ).hexdigest()[:24]
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return _cache_dir() / key / f"{_NAME}{suffix}"


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(_NAME, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build() -> None:
    try:
        cc = _compiler()
        include = sysconfig.get_paths()["include"]
        if cc is None or not Path(include, "Python.h").exists():
            raise RuntimeError("no C compiler or no Python.h")
        path = _library_path(cc)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
                built = Path(tmp, path.name)
                cmd = [cc, "-shared", "-fPIC", "-O2", f"-I{include}", str(_SOURCE), "-o", str(built)]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                if proc.returncode != 0:
                    raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
                os.replace(built, path)  # (atomic: a concurrent build of the same source wins or loses whole)
        _state["module"] = _load(path)
    except Exception as err:  # guards then run as Python, correct and slower
        _state["failed"] = str(err)
        _log.info("dynajit guards: the guard machine is not available (%s); guards run as Python", err)


def machine_module(wait: bool = False) -> ModuleType | None:
    """The built guard machine module, or None while it builds (``wait`` waits) or when it cannot be built."""
    module = _state.get("module")
    if module is not None or "failed" in _state:
        return module  # type: ignore[return-value]
    with _lock:
        thread = _state.get("thread")
        if thread is None:
            # (not a daemon: a build running at exit finishes, leaving no temporary directory in the cache)
            thread = _state["thread"] = threading.Thread(target=_build, name="dynajit-guard-machine")
            thread.start()
    if wait:
        thread.join()  # type: ignore[attr-defined]
    return _state.get("module")  # type: ignore[return-value]
