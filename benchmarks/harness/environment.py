"""The benchmark process's environment: malloc and thread settings, isolated compile caches, machine facts.

glibc reads ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_`` once, when
the process starts, so a process started without them re-executes itself with
them set (see ``benchmarks/README.md`` for why they matter).
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
from typing import Any

# Values the ``bench`` and ``demo`` nox sessions set; 1 GiB keeps freed tensors' pages mapped between calls.
BENCH_ENV: dict[str, str] = {
    "MALLOC_MMAP_THRESHOLD_": "1073741824",
    "MALLOC_TRIM_THRESHOLD_": "1073741824",
    "OMP_NUM_THREADS": "2",
}
_REEXEC_MARK = "DYNAJIT_BENCH_REEXEC"


def run_strict() -> None:
    """Make dynajit raise instead of silently running a frame eagerly (``DYNAJIT_STRICT=1``, and its config).

    A workload whose frame fell back to eager (a failed conversion or backend compile, the cache size limit)
    must show as a failure with its reason, never as a speedup of what is really eager code. Call it before
    dynajit is imported; an already imported dynajit is switched too.
    """
    os.environ["DYNAJIT_STRICT"] = "1"
    capture = sys.modules.get("dynajit.capture")
    if capture is not None:
        capture.config.strict = True


def ensure_bench_env() -> None:
    """Re-execute this process with :data:`BENCH_ENV` when any of it is missing (at most once); run strict.

    Must run before torch is imported: OpenMP and malloc read these at start-up.
    A value the caller set explicitly is kept.
    """
    run_strict()
    missing = {name: value for name, value in BENCH_ENV.items() if name not in os.environ}
    if not missing or os.environ.get(_REEXEC_MARK):
        return
    env = {**os.environ, **missing, _REEXEC_MARK: "1"}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)  # keeps -X, -c and friends


def isolate_compile_caches() -> str:
    """Point torch.compile's and dynajit's on-disk caches at a fresh directory, so "cold" means cold.

    Call before torch is imported. Returns the directory (removed by the OS's tmp cleaning, not by us,
    so a crashed run leaves its generated code for inspection).
    """
    root = tempfile.mkdtemp(prefix="dynajit-bench-cache-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "torchinductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(root, "triton")
    os.environ["DYNAJIT_CACHE_DIR"] = os.path.join(root, "dynajit")
    return root


def point_dynajit_cache_at(root: str) -> list[str]:
    """Set every ``*cache_dir*`` field of inductor-lite's config to a directory under ``root``.

    The config's field names are inductor-lite's business; matching on the name keeps this working
    whatever the field is called. Returns the fields changed (empty when the config is not there yet).
    """
    try:
        from dynajit.inductor_lite import config  # type: ignore[attr-defined]
    except Exception:
        return []
    changed = []
    for name in dir(config):
        if "cache_dir" in name and not name.startswith("_"):
            try:
                setattr(config, name, os.path.join(root, "dynajit", name))
                changed.append(name)
            except Exception:
                continue
    return changed


def fresh_cache_folder(root: str, label: str) -> str:
    """A new, empty folder under ``root`` for one workload's cold compiles (``label`` names it for inspection)."""
    return tempfile.mkdtemp(prefix=f"{''.join(c if c.isalnum() else '_' for c in label)}-", dir=root)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def source_revision() -> str:
    """The repository's commit, with ``+changes`` when the work tree differs from it ("unknown" outside git)."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "packages"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{commit}+changes" if dirty else commit


def machine_facts() -> dict[str, Any]:
    """What the figures were measured on: CPU, cores, versions, and the malloc/thread settings in force."""
    import torch

    libc, libc_version = platform.libc_ver()
    try:
        usable_cores = len(os.sched_getaffinity(0))
    except AttributeError:
        usable_cores = os.cpu_count() or 0
    return {
        "cpu": _cpu_model(),
        "cores_usable": usable_cores,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "libc": f"{libc} {libc_version}".strip(),
        "env": {name: os.environ.get(name, "(unset)") for name in BENCH_ENV},
    }
