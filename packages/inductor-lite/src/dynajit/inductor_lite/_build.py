"""Build C++ sources into shared libraries through a disk cache.

An entry is keyed by a hash of the source, the compiler flags and the compiler's identity
(path, size, mtime). It is written atomically (temporary file + ``os.replace``) with a sidecar
holding the library's SHA-256; an entry whose checksum does not match, or that fails to load,
is rebuilt, never used. A second process compiling the same graph loads the library from disk.
A kernel is called through its METH_FASTCALL entry point (``python_function``), not through ctypes.

``start_library`` runs the lookup and the compiler on a thread and returns a future, so the caller
goes on (writing the wrapper, building guards) while g++ works; the lock is held only to look up
and record entries, so two graphs (a forward and its backward) build at the same time.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

__all__ = [
    "BuildError",
    "CacheStats",
    "cache_dir",
    "cache_stats",
    "forget_loaded_libraries",
    "load_library",
    "python_function",
    "start_library",
    "stats",
]

log = logging.getLogger("dynajit.inductor_lite")


class BuildError(RuntimeError):
    """The C++ compiler rejected a generated source."""


class CacheStats:
    """Counts of cache outcomes in this process (for tests and the benchmark's cold/warm report)."""

    def __init__(self) -> None:
        self.memory_hits = 0
        self.disk_hits = 0
        self.builds = 0
        self.rebuilt_corrupt = 0
        self.graphs_compiled = 0  # aten graphs lowered and code-generated (a dynamic graph counts once)

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


stats = CacheStats()
_loaded: dict[str, ctypes.CDLL] = {}
_pending: dict[str, Future[ctypes.CDLL]] = {}  # libraries being looked up or built, by the same key as _loaded
_lock = threading.Lock()
_compiler_ids: dict[str, str] = {}


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]  # fmt: skip


_METH_FASTCALL = 0x0080
_new_function = ctypes.pythonapi.PyCFunction_NewEx
_new_function.restype = ctypes.py_object
_new_function.argtypes = [ctypes.POINTER(_MethodDef), ctypes.py_object, ctypes.py_object]


class _Entry:
    """A kernel function's ``self``: the method definition CPython reads at every call, and the library the code
    is in, both kept as long as the function lives."""

    __slots__ = ("definition", "library")

    def __init__(self, definition: _MethodDef, library: ctypes.CDLL) -> None:
        self.definition, self.library = definition, library


def python_function(library: ctypes.CDLL, symbol: str) -> Any:
    """Kernel ``symbol`` of ``library`` as a builtin function taking its pointers and sizes as ints (the source's
    ``DJ_PY(symbol)`` entry point)."""
    address = ctypes.cast(getattr(library, f"dj_py_{symbol}"), ctypes.c_void_p).value
    entry = _Entry(_MethodDef(symbol.encode(), address, _METH_FASTCALL, None), library)
    return _new_function(ctypes.byref(entry.definition), entry, None)


def cache_stats() -> dict[str, int]:
    """This process's kernel-cache outcomes: memory_hits, disk_hits, builds, rebuilt_corrupt, graphs_compiled.

    ``builds`` counts C++ libraries compiled and Triton modules written; ``graphs_compiled`` counts
    aten graphs code-generated. A dynamic graph running at a new size changes none of them.
    """
    return stats.as_dict()


def forget_loaded_libraries() -> None:
    """Drop the in-process table of loaded libraries, so the next compile consults the disk cache."""
    with _lock:
        _loaded.clear()


def cache_dir(configured: str = "") -> Path:
    """The kernel cache directory: the configured one, ``$DYNAJIT_CACHE_DIR``, or ``~/.cache/dynajit/inductor_lite``."""
    root = (
        configured
        or os.environ.get("DYNAJIT_CACHE_DIR")
        or os.path.join(Path.home(), ".cache", "dynajit", "inductor_lite")
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _compiler_identity(cxx: str) -> str:
    found = _compiler_ids.get(cxx)
    if found is None:
        path = shutil.which(cxx)
        if path is None:
            raise BuildError(
                f"inductor-lite: C++ compiler {cxx!r} not found; install g++ or set config.cxx / DYNAJIT_CXX"
            )
        real = os.path.realpath(path)
        st = os.stat(real)
        found = f"{real}:{st.st_size}:{int(st.st_mtime)}"
        _compiler_ids[cxx] = found
    return found


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _valid_entry(lib: Path, meta: Path) -> bool:
    try:
        recorded = json.loads(meta.read_text())["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    try:
        return _sha256_file(lib) == recorded
    except OSError:
        return False


def load_library(
    source: str, cxx: str, flags: str, directory: str = "", tally: CacheStats | None = None
) -> tuple[ctypes.CDLL, str]:
    """The loaded library built from ``source`` (from memory, disk, or a fresh build) and its key."""
    future, key = start_library(source, cxx, flags, directory, tally)
    return future.result(), key


def start_library(
    source: str, cxx: str, flags: str, directory: str = "", tally: CacheStats | None = None
) -> tuple[Future[ctypes.CDLL], str]:
    """A future of the library built from ``source``, and its key; only the compiler runs on a thread.

    A library loaded before, or found valid on disk, is returned done, and every cache outcome is
    counted (in ``tally``, by default the kernel cache's :func:`cache_stats`) before this returns. The same source requested while it is being built shares that
    build. A compiler error is the future's exception (:class:`BuildError`).
    """
    key = hashlib.sha256("\0".join((source, cxx, flags, _compiler_identity(cxx))).encode()).hexdigest()[:40]
    tally = stats if tally is None else tally
    memory_key = f"{directory}:{key}"
    future: Future[ctypes.CDLL] = Future()
    with _lock:
        pending = _pending.get(memory_key)
        if pending is not None:
            tally.memory_hits += 1
            return pending, key
        lib = _loaded.get(memory_key)
        if lib is not None:
            tally.memory_hits += 1
            future.set_result(lib)
            return future, key
        folder = cache_dir(directory) / key[:2]
        folder.mkdir(parents=True, exist_ok=True)
        so_path, meta_path = folder / f"{key}.so", folder / f"{key}.json"
        lib = _load_cached(so_path, meta_path, tally)
        if lib is not None:
            _loaded[memory_key] = lib
            future.set_result(lib)
            return future, key
        tally.builds += 1
        _pending[memory_key] = future
    # Not a daemon: a build still running at exit finishes, so no temporary directory is left in the cache.
    worker = threading.Thread(
        target=_produce,
        args=(future, memory_key, (source, cxx, flags, folder, key, so_path, meta_path)),
        name=f"dynajit-build-{key[:8]}",
    )
    worker.start()
    return future, key


def failed_build(error: BuildError) -> Future[ctypes.CDLL]:
    """A library future that holds ``error``: a build that cannot start fails where a build is waited on."""
    future: Future[ctypes.CDLL] = Future()
    future.set_exception(error)
    return future


def _finish_pending() -> None:
    """Wait for the builds in flight: a forked child has no build threads, so it could never see them end."""
    with _lock:
        futures = list(_pending.values())
    for future in futures:
        future.exception()  # waits; a failed build is raised where its library is used


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_finish_pending)


def _load_cached(so_path: Path, meta_path: Path, tally: CacheStats) -> ctypes.CDLL | None:
    """The library of a valid disk entry, or None (absent, or corrupt: then counted and logged)."""
    if not so_path.exists():
        return None
    if _valid_entry(so_path, meta_path):
        try:
            lib = ctypes.CDLL(str(so_path))
            tally.disk_hits += 1
            return lib
        except OSError as err:
            log.warning("inductor-lite: cached kernel library %s failed to load (%s); rebuilding", so_path, err)
    else:
        log.warning("inductor-lite: cached kernel library %s is corrupt; rebuilding", so_path)
    tally.rebuilt_corrupt += 1
    return None


def _produce(future: Future[ctypes.CDLL], memory_key: str, build_args: tuple) -> None:
    try:
        _build(*build_args)
        lib = ctypes.CDLL(str(build_args[5]))
    except BaseException as err:  # handed to whoever waits on the future
        with _lock:
            _pending.pop(memory_key, None)
        future.set_exception(err)
        return
    with _lock:
        _loaded[memory_key] = lib
        _pending.pop(memory_key, None)
    future.set_result(lib)


# g++ 12 with -march=native on a CPU with AVX512-FP16 emits masked ``vmovsh`` for float16 loads, which the
# assembler of binutils 2.40 rejects ("unsupported masking for `vmovsh'"): such a build is made again without
# those instructions (float16 values are then converted through float32 registers, rounding as before).
_ASSEMBLER_REJECTS_FP16 = "unsupported masking for `vmovsh'"
_NO_FP16 = "-mno-avx512fp16"


def _build(source: str, cxx: str, flags: str, folder: Path, key: str, so_path: Path, meta_path: Path) -> None:
    with tempfile.TemporaryDirectory(dir=folder, prefix=f".{key}.") as tmp:
        src = Path(tmp) / "kernels.cpp"
        src.write_text(source)
        out = Path(tmp) / "kernels.so"
        cmd = [cxx, *flags.split(), "-shared", "-fPIC", "-o", str(out), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 and _ASSEMBLER_REJECTS_FP16 in proc.stderr:
            cmd = [cxx, *flags.split(), _NO_FP16, "-shared", "-fPIC", "-o", str(out), str(src)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(f"inductor-lite: {' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
        digest = _sha256_file(out)
        meta_tmp = Path(tmp) / "meta.json"
        meta_tmp.write_text(json.dumps({"sha256": digest, "flags": flags, "cxx": cxx}))
        # Every file moves from this build's own directory: processes building the same kernel at once (test
        # workers, data-loader workers) share no temporary name. Library before its checksum: a crash between
        # the two leaves an entry that fails validation.
        os.replace(src, folder / f"{key}.cpp")
        os.replace(out, so_path)
        os.replace(meta_tmp, meta_path)
