"""Build C++ sources into shared libraries through a disk cache.

An entry is keyed by a hash of the source, the compiler flags and the compiler's identity
(path, size, mtime). It is written atomically (temporary file + ``os.replace``) with a sidecar
holding the library's SHA-256; an entry whose checksum does not match, or that fails to load,
is rebuilt, never used. A second process compiling the same graph loads the library from disk.
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
from pathlib import Path

__all__ = ["BuildError", "CacheStats", "cache_dir", "cache_stats", "forget_loaded_libraries", "load_library", "stats"]

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
_lock = threading.Lock()
_compiler_ids: dict[str, str] = {}


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


def load_library(source: str, cxx: str, flags: str, directory: str = "") -> tuple[ctypes.CDLL, str]:
    """The loaded library built from ``source`` (from memory, disk, or a fresh build) and its key."""
    key = hashlib.sha256("\0".join((source, cxx, flags, _compiler_identity(cxx))).encode()).hexdigest()[:40]
    with _lock:
        memory_key = f"{directory}:{key}"
        lib = _loaded.get(memory_key)
        if lib is not None:
            stats.memory_hits += 1
            return lib, key
        folder = cache_dir(directory) / key[:2]
        folder.mkdir(parents=True, exist_ok=True)
        so_path, meta_path = folder / f"{key}.so", folder / f"{key}.json"
        if so_path.exists():
            if _valid_entry(so_path, meta_path):
                try:
                    lib = ctypes.CDLL(str(so_path))
                    stats.disk_hits += 1
                except OSError as err:
                    log.warning("inductor-lite: cached kernel library %s failed to load (%s); rebuilding", so_path, err)
            else:
                log.warning("inductor-lite: cached kernel library %s is corrupt; rebuilding", so_path)
            if lib is None:
                stats.rebuilt_corrupt += 1
        if lib is None:
            _build(source, cxx, flags, folder, key, so_path, meta_path)
            stats.builds += 1
            lib = ctypes.CDLL(str(so_path))
        _loaded[memory_key] = lib
        return lib, key


def _build(source: str, cxx: str, flags: str, folder: Path, key: str, so_path: Path, meta_path: Path) -> None:
    with tempfile.TemporaryDirectory(dir=folder, prefix=f".{key}.") as tmp:
        src = Path(tmp) / "kernels.cpp"
        src.write_text(source)
        out = Path(tmp) / "kernels.so"
        cmd = [cxx, *flags.split(), "-shared", "-fPIC", "-o", str(out), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(f"inductor-lite: {' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
        digest = _sha256_file(out)
        meta_tmp = Path(tmp) / "meta.json"
        meta_tmp.write_text(json.dumps({"sha256": digest, "flags": flags, "cxx": cxx}))
        shutil.copyfile(src, folder / f"{key}.cpp.tmp")
        os.replace(folder / f"{key}.cpp.tmp", folder / f"{key}.cpp")
        # Library first, then its checksum: a crash between the two leaves an entry that fails validation.
        os.replace(out, so_path)
        os.replace(meta_tmp, meta_path)
