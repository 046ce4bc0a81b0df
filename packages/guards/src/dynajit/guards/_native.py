"""The guard machine (``_vm.c``) and its tensor facts reader (``_tensor_facts.cpp``), each built once per
interpreter, compiler (and, for the reader, torch) into a cached extension module.

A compiled guard set runs as a program of the machine when it can be built (a C compiler and the interpreter's
headers); until the build is done, and wherever it cannot be, guards run as generated Python. The reader,
built against torch's headers and libraries (a C++ compiler; some seconds), answers the machine's tensor checks
from the TensorImpl; without it the machine runs them as Python. Each build (or the load of a cached build)
starts on a thread when guards are imported, never on the caller's time: a guard set compiled before it is done
does without it.
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
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

__all__ = ["machine_module", "tensor_facts_module"]

_log = logging.getLogger("dynajit.guards")
_HERE = Path(__file__).parent
_PYTHON_INCLUDE = sysconfig.get_paths()["include"]


def _cache_dir() -> Path:
    configured = os.environ.get("DYNAJIT_GUARDS_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "dynajit" / "guards"


def _c_compiler() -> str | None:
    return shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc")


def _cxx_compiler() -> str | None:
    return shutil.which(os.environ.get("CXX") or "c++") or shutil.which("g++")


def _machine_command(cc: str, source: Path, out: Path) -> list[str]:
    return [cc, "-shared", "-fPIC", "-O2", f"-I{_PYTHON_INCLUDE}", str(source), "-o", str(out)]


def _torch_dirs() -> tuple[Path, Path]:
    root = Path(torch.__file__).parent
    return root / "include", root / "lib"


def _reader_command(cxx: str, source: Path, out: Path) -> list[str]:
    include, lib = _torch_dirs()
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return [
        cxx, "-shared", "-fPIC", "-O2", "-std=c++20", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", f"-I{_PYTHON_INCLUDE}",
        f"-I{include}", f"-I{include / 'torch' / 'csrc' / 'api' / 'include'}", str(source), "-o", str(out),
        f"-L{lib}", "-lc10", "-ltorch_cpu", "-ltorch_python", f"-Wl,-rpath,{lib}",
    ]  # fmt: skip


def _reader_key() -> bytes:
    return f"{torch.__version__} {_torch_dirs()[0]}".encode()


class _Extension:
    """One extension module: built (or loaded from the cache) on a thread at the first ask."""

    def __init__(
        self,
        name: str,
        source: str,
        compiler: Callable[[], str | None],
        command: Callable[[str, Path, Path], list[str]],
        key: Callable[[], bytes] = lambda: b"",
    ) -> None:
        self.name, self.source, self.compiler, self.command, self.key = name, _HERE / source, compiler, command, key
        self.lock = threading.Lock()
        self.state: dict[str, object] = {}  # "module": the loaded module, "thread": the build running, "failed": why

    def _library_path(self, compiler: str) -> Path:
        parts = [
            self.source.read_bytes(),
            sys.version.encode(),
            _PYTHON_INCLUDE.encode(),
            compiler.encode(),
            self.key(),
        ]
        key = hashlib.sha256(b"\0".join(parts)).hexdigest()[:24]
        return _cache_dir() / key / f"{self.name}{importlib.machinery.EXTENSION_SUFFIXES[0]}"

    def _build(self) -> None:
        try:
            compiler = self.compiler()
            if compiler is None or not Path(_PYTHON_INCLUDE, "Python.h").exists():
                raise RuntimeError("no compiler or no Python.h")
            path = self._library_path(compiler)
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
                    built = Path(tmp, path.name)
                    cmd = self.command(compiler, self.source, built)
                    proc = subprocess.run(cmd, capture_output=True, text=True)
                    if proc.returncode != 0:
                        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
                    os.replace(built, path)  # (atomic: a concurrent build of the same source wins or loses whole)
            spec = importlib.util.spec_from_file_location(self.name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self.state["module"] = module
        except Exception as err:  # guards then do without it, correct and slower
            self.state["failed"] = str(err)
            _log.info("dynajit guards: %s is not available (%s); guards do without it", self.name, err)

    def module(self, wait: bool = False) -> ModuleType | None:
        """The built module, or None while it builds (``wait`` waits) or when it cannot be built."""
        module = self.state.get("module")
        if module is not None or "failed" in self.state:
            return module  # type: ignore[return-value]
        with self.lock:
            thread = self.state.get("thread")
            if thread is None:
                # (not a daemon: a build running at exit finishes, leaving no temporary directory in the cache)
                thread = self.state["thread"] = threading.Thread(target=self._build, name=f"dynajit-{self.name}")
                thread.start()
        if wait:
            thread.join()  # type: ignore[attr-defined]
        return self.state.get("module")  # type: ignore[return-value]


_MACHINE = _Extension("dynajit_guard_machine", "_vm.c", _c_compiler, _machine_command)
_READER = _Extension("dynajit_tensor_facts", "_tensor_facts.cpp", _cxx_compiler, _reader_command, _reader_key)


def machine_module(wait: bool = False) -> ModuleType | None:
    """The built guard machine module, or None while it builds (``wait`` waits) or when it cannot be built."""
    return _MACHINE.module(wait)


def tensor_facts_module(wait: bool = False) -> ModuleType | None:
    """The built tensor facts reader, or None while it builds (``wait`` waits) or when it cannot be built."""
    return _READER.module(wait)
