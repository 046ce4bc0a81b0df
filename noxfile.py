"""Every command the repository has: tests, per-package isolation, lint, types, layers, build, models, fuzz, bench, demo.

Run ``python3 -m pip install nox && python3 -m nox -s <session>``; ``nox -l`` lists them.
"""

from __future__ import annotations

import glob
import os
import pathlib
import shutil
import sys

import nox

ROOT = pathlib.Path(__file__).parent
PYTHONS = ["3.11", "3.12", "3.13"]
TORCH = "torch==2.13.0"
TRITON = "triton==3.7.1"  # the release torch 2.13 pins; used directly by the Triton code path
RUFF = "ruff==0.17.6"
# The real-model workloads need a torchvision built against the installed torch: PyPI's torchvision pairs with
# PyPI's torch of the same release, so benchmarks run on that pair (CPU execution either way).
BENCH_TORCH = "torch==2.14.1"
# Model libraries are pinned to the releases the suite was last run against: a new release changes model code
# (transformers 5.24 renamed ``past_key_values`` through a wrapper that rewrites ``**kwargs``), so moving to one
# is a change of its own, made after running the real-model suite on it.
BENCH_MODELS = ["torchvision==0.29.1", "transformers==5.24.0", "timm==1.0.31"]
TEST_DEPS = ["pytest>=8", "pytest-xdist>=3.5", "hypothesis>=6.100", "numpy"]

# Each distribution and the dynajit distributions it depends on (the layer graph).
PACKAGES: dict[str, list[str]] = {
    "fxgraph": [],
    "guards": [],
    "capture": ["fxgraph", "guards"],
    "inductor-lite": ["fxgraph"],
    "api": ["fxgraph", "guards", "capture", "inductor-lite"],
}
TEST_DIR = {"inductor-lite": "inductor_lite"}

nox.options.sessions = ["lint", "layers", "tests", "package_tests", "models"]
nox.options.error_on_missing_interpreters = False
nox.options.reuse_existing_virtualenvs = False


def _expose_pyenv_interpreters() -> None:
    """Put every pyenv-installed CPython 3.11-3.13 on PATH, so nox finds python3.X."""
    root = pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv"))
    found = []
    for version in PYTHONS:
        if shutil.which(f"python{version}") and _runs(f"python{version}"):
            continue
        candidates = sorted(glob.glob(str(root / "versions" / f"{version}.*" / "bin")), reverse=True)
        found.extend(candidates[:1])
    if found:
        os.environ["PATH"] = os.pathsep.join([*found, os.environ.get("PATH", "")])


def _runs(executable: str) -> bool:
    import subprocess

    return subprocess.run([executable, "-c", "pass"], capture_output=True).returncode == 0


_expose_pyenv_interpreters()


def _local(*names: str, extras: str = "") -> list[str]:
    return [str(ROOT / "packages" / name) + (extras if name == "inductor-lite" else "") for name in names]


def _install_all_editable(session: nox.Session, *extra: str, torch: str = TORCH) -> None:
    session.install(torch, *extra)
    editable = []
    for name in PACKAGES:
        editable += ["-e", str(ROOT / "packages" / name)]
    session.install("--no-deps", *editable)
    session.install("bytecode>=0.16", "typing_extensions>=4.6")


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """All test suites on this interpreter (missing interpreters are skipped with a message)."""
    _install_all_editable(session, TRITON, *TEST_DEPS)
    workers = os.environ.get("DYNAJIT_TEST_WORKERS", "2")
    session.run("pytest", "-n", workers, "--dist", "loadfile", *session.posargs, env={"TRITON_INTERPRET": "1"})


@nox.session(python="3.11")
@nox.parametrize("package", list(PACKAGES))
def package_tests(session: nox.Session, package: str) -> None:
    """Install one distribution alone (with only its lower layers) and run only its tests."""
    session.install(TORCH, *TEST_DEPS)
    session.install(*_local(*PACKAGES[package], package))
    tests_dir = ROOT / "tests" / TEST_DIR.get(package, package)
    session.run(
        "python",
        "-c",
        "import importlib.util, sys; "
        "others = [m for m in ('dynajit.fxgraph', 'dynajit.guards', 'dynajit.capture', 'dynajit.inductor_lite', "
        "'dynajit.compiler') if importlib.util.find_spec(m) is not None]; print('installed:', others)",
    )
    session.run("pytest", "-n", "2", "--dist", "loadfile", str(tests_dir), *session.posargs)


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole repository."""
    session.install(RUFF)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python="3.11")
def types(session: nox.Session) -> None:
    """mypy over the five packages."""
    session.install(TORCH, "mypy>=1.10", "bytecode>=0.16", "typing_extensions", "numpy")
    session.run("mypy", *[str(ROOT / "packages" / name / "src" / "dynajit") for name in PACKAGES])


@nox.session(python="3.11")
def layers(session: nox.Session) -> None:
    """The layer contract: import-linter over the packages, and ruff's banned-API rule for torch.compile & co."""
    session.install(TORCH, "import-linter>=2.1", RUFF)
    session.install("--no-deps", *[arg for name in PACKAGES for arg in ("-e", str(ROOT / "packages" / name))])
    session.run("lint-imports", "--config", str(ROOT / "pyproject.toml"))
    session.run("ruff", "check", "--select", "TID251", *[str(ROOT / "packages" / name / "src") for name in PACKAGES])
    session.run("python", str(ROOT / "tools" / "check_versions.py"))


@nox.session(python="3.11")
def build(session: nox.Session) -> None:
    """Build sdists and wheels of all five, then install the wheels into a fresh venv and import every package."""
    session.install("build>=1.2")
    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    for name in PACKAGES:
        session.run("python", "-m", "build", "--outdir", str(dist), str(ROOT / "packages" / name))
    fresh = pathlib.Path(session.create_tmp()) / "fresh-venv"
    shutil.rmtree(fresh, ignore_errors=True)
    session.run(sys.executable, "-m", "venv", str(fresh), external=True)
    python = str(fresh / "bin" / "python")
    session.run(python, "-m", "pip", "install", "-q", TORCH, external=True)
    wheels = sorted(str(p) for p in dist.glob("*.whl"))
    session.run(python, "-m", "pip", "install", "-q", *wheels, external=True)
    session.run(
        python,
        "-c",
        "import dynajit.fxgraph, dynajit.guards, dynajit.capture, dynajit.inductor_lite, dynajit.compiler, "
        "dynajit._dynamo; import importlib.util; assert importlib.util.find_spec('dynajit').origin is None; "
        "print('all five distributions import; dynajit is a namespace package')",
        external=True,
    )


def _bench_env() -> dict[str, str]:
    # Keep freed tensors' pages mapped between calls so eager timings do not swing (see benchmarks/README.md).
    return {"MALLOC_MMAP_THRESHOLD_": "1073741824", "MALLOC_TRIM_THRESHOLD_": "1073741824", "OMP_NUM_THREADS": "2"}


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Benchmarks: eager vs torch.compile vs dynajit, side by side in one process (``-- --quick`` for a short run)."""
    if "--quick" in session.posargs:  # a quick run has no real models: the small CPU torch is enough
        _install_all_editable(session, "matplotlib", "numpy")
    else:
        # the model zoo's packages (tests/models/zoo.py): the full run measures every eval and train entry
        _install_all_editable(session, *BENCH_MODELS, "matplotlib", "numpy", torch=BENCH_TORCH)
    session.run("python", str(ROOT / "benchmarks" / "run.py"), *session.posargs, env=_bench_env())


@nox.session(python="3.11")
def models(session: nox.Session) -> None:
    """The real-model suite (tests/models): small torchvision, timm and transformers models compiled against eager."""
    _install_all_editable(session, *BENCH_MODELS, *TEST_DEPS, torch=BENCH_TORCH)
    workers = os.environ.get("DYNAJIT_TEST_WORKERS", "2")
    session.run(
        "pytest",
        "-n",
        workers,
        "--dist",
        "load",
        str(ROOT / "tests" / "models"),
        *session.posargs,
        env={"DYNAJIT_STRICT": "1", "OMP_NUM_THREADS": "1"},
    )


@nox.session(python="3.11")
def demo(session: nox.Session) -> None:
    """Compile a small transformer and show graphs, breaks, compile time and speed."""
    _install_all_editable(session, "numpy")
    session.run("python", str(ROOT / "benchmarks" / "demo.py"), *session.posargs, env=_bench_env())


@nox.session(python="3.11")
def fuzz(session: nox.Session) -> None:
    """Differential fuzzing: random programs eager vs compiled, one fuzzer per core (``-- --minutes 30``,
    ``-- --seed 7 --count 500``, ``-- --jobs 1``)."""
    _install_all_editable(session, TRITON, *TEST_DEPS)
    args = session.posargs or ["--minutes", "10"]
    if not any(a.split("=", 1)[0] == "--jobs" for a in args):
        args = [*args, "--jobs", str(os.cpu_count() or 1)]
    session.run("python", "-m", "tests.fuzz", *args, env={"TRITON_INTERPRET": "1"})
