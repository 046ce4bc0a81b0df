"""The repository's own shape: five distributions, one version, a PEP 420 namespace, the layer contract."""

from __future__ import annotations

import ast
import importlib.metadata
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DISTRIBUTIONS = {
    "fxgraph": ("dynajit-fxgraph", ["fxgraph"]),
    "guards": ("dynajit-guards", ["guards"]),
    "capture": ("dynajit-capture", ["capture"]),
    "inductor-lite": ("dynajit-inductor-lite", ["inductor_lite"]),
    "api": ("dynajit-api", ["compiler", "_dynamo"]),
}
LAYERS = {
    "fxgraph": set(),
    "guards": set(),
    "capture": {"dynajit-fxgraph", "dynajit-guards"},
    "inductor-lite": {"dynajit-fxgraph"},
    "api": {"dynajit-fxgraph", "dynajit-guards", "dynajit-capture", "dynajit-inductor-lite"},
}

sys.path.insert(0, str(ROOT / "tools"))
import check_versions  # noqa: E402


def _project(folder: str) -> dict:
    return tomllib.loads((ROOT / "packages" / folder / "pyproject.toml").read_text())


@pytest.mark.parametrize("folder", DISTRIBUTIONS)
def test_each_distribution_has_its_own_build_readme_and_typed_src_layout(folder: str) -> None:
    config = tomllib.loads((ROOT / "packages" / folder / "pyproject.toml").read_text())
    assert config["build-system"]["build-backend"] == "hatchling.build"
    name, import_names = DISTRIBUTIONS[folder]
    assert config["project"]["name"] == name
    assert (ROOT / "packages" / folder / "README.md").read_text().strip()
    src = ROOT / "packages" / folder / "src" / "dynajit"
    assert not (src / "__init__.py").exists(), "dynajit is a PEP 420 namespace: no distribution ships its __init__.py"
    for import_name in import_names:
        assert (src / import_name / "py.typed").exists()
        assert (src / import_name / "__init__.py").exists()


@pytest.mark.parametrize("folder", DISTRIBUTIONS)
def test_dependencies_follow_the_layer_graph(folder: str) -> None:
    requirements = _project(folder)["project"]["dependencies"]
    internal = {r.split("==")[0].split("[")[0] for r in requirements if r.startswith("dynajit-")}
    assert internal == LAYERS[folder]


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def _installable(folder: str) -> set[str]:
    """What installing the distribution in ``folder`` alone brings: its requirements, theirs, and torch's."""
    requirements = _project(folder)["project"]["dependencies"]
    names = _requirement_names(requirements)
    for other, (name, _) in DISTRIBUTIONS.items():
        if name in names:
            names |= _installable(other)
    if "torch" in names:
        names |= _requirement_names([r for r in importlib.metadata.requires("torch") or [] if "extra ==" not in r])
    return names


def _imported_at_load(path: pathlib.Path) -> set[str]:
    """Top-level modules a source file imports when it is loaded (not in functions, ``try`` or TYPE_CHECKING)."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
            elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                visit(node.body)
                visit(node.orelse)

    visit(ast.parse(path.read_text()).body)
    return found - set(sys.stdlib_module_names) - {"dynajit", "__future__"}


@pytest.mark.parametrize("folder", DISTRIBUTIONS)
def test_each_distribution_declares_what_it_imports(folder: str) -> None:
    # A tool author may install dynajit-capture alone: every module its code imports on load must come with it.
    providers = importlib.metadata.packages_distributions()
    missing = {}
    for path in sorted((ROOT / "packages" / folder / "src").rglob("*.py")):
        for module in _imported_at_load(path):
            distribution = providers.get(module, [module])[0].lower().replace("_", "-")
            if distribution not in _installable(folder):
                missing.setdefault(distribution, path.relative_to(ROOT).as_posix())
    assert missing == {}, f"imported but not required by {DISTRIBUTIONS[folder][0]}: {missing}"


def test_triton_is_an_optional_extra_of_inductor_lite() -> None:
    project = _project("inductor-lite")["project"]
    assert not any(r.startswith("triton") for r in project["dependencies"])
    assert any(r.startswith("triton") for r in project["optional-dependencies"]["triton"])


def test_backends_are_declared_through_entry_points() -> None:
    assert _project("inductor-lite")["project"]["entry-points"]["dynajit.backends"]["inductor"]
    assert "eager" in _project("api")["project"]["entry-points"]["dynajit.backends"]


def test_versions_agree_and_internal_pins_are_exact() -> None:
    version = (ROOT / "VERSION").read_text().strip()
    assert check_versions.problems(version) == []


def test_version_drift_is_detected(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copies = []
    for folder in DISTRIBUTIONS:
        target = tmp_path / folder / "pyproject.toml"
        target.parent.mkdir()
        text = (ROOT / "packages" / folder / "pyproject.toml").read_text()
        if folder == "capture":
            version = (ROOT / "VERSION").read_text().strip()
            text = text.replace(f'"dynajit-guards=={version}"', '"dynajit-guards==9.9.9"')
        target.write_text(text)
        copies.append(target)
    monkeypatch.setattr(check_versions, "PYPROJECTS", copies)
    monkeypatch.setattr(check_versions, "ROOT", tmp_path)
    found = check_versions.problems((ROOT / "VERSION").read_text().strip())
    assert len(found) == 1 and "dynajit-guards" in found[0]


def _lint_imports() -> str | None:
    return shutil.which("lint-imports") or shutil.which("lint-imports", path=str(pathlib.Path(sys.executable).parent))


@pytest.mark.skipif(_lint_imports() is None, reason="import-linter is not installed in this environment")
def test_layer_contract_rejects_an_upward_import(tmp_path: pathlib.Path) -> None:
    """A copy of the sources with one deliberate bad import makes import-linter fail; the real sources pass."""
    sources = []
    for folder in DISTRIBUTIONS:
        copy = tmp_path / folder
        shutil.copytree(ROOT / "packages" / folder / "src", copy, ignore=shutil.ignore_patterns("__pycache__"))
        sources.append(str(copy))
    bad = tmp_path / "guards" / "dynajit" / "guards" / "_deliberately_bad.py"
    bad.write_text("import dynajit.capture\n")
    run = subprocess.run(
        [_lint_imports(), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": ":".join(sources), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode != 0, run.stdout
    assert "dynajit.guards._deliberately_bad" in run.stdout


def _dynajit_modules_imported(path: pathlib.Path) -> set[str]:
    """The dynajit packages a file imports anywhere in it (``import dynajit.x``, ``from dynajit[.x] import ...``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("dynajit."))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "dynajit":
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("dynajit."):
            found.add(node.module.split(".")[1])
    return found


@pytest.mark.parametrize("folder", DISTRIBUTIONS)
def test_each_distributions_tests_import_only_what_installing_it_alone_brings(folder: str) -> None:
    # ``nox -s package_tests`` installs one distribution with only its lower layers and runs its own tests.
    names = {DISTRIBUTIONS[folder][0], *LAYERS[folder]}
    allowed = {i for _, (n, imports) in DISTRIBUTIONS.items() if n in names for i in imports}
    tests = ROOT / "tests" / folder.replace("-", "_")
    above = {
        path.relative_to(ROOT).as_posix(): sorted(modules - allowed)
        for path in sorted(tests.rglob("*.py"))
        if (modules := _dynajit_modules_imported(path)) - allowed
    }
    assert above == {}, f"not installed with {DISTRIBUTIONS[folder][0]} alone (move these tests to tests/integration)"


def test_test_module_basenames_are_unique() -> None:
    """pytest imports test modules by basename (rootdir-relative), so two packages' tests may not share one."""
    names = [path.name for path in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme_commands = [line.strip() for line in (ROOT / "README.md").read_text().splitlines() if "nox -s" in line]
    test_command = next(line for line in readme_commands if " tests" in line)
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines


def test_importing_the_compiler_loads_neither_dynamo_nor_aot_autograd() -> None:
    # They are what dynajit rebuilds; AOT autograd (which imports torch._dynamo) is loaded by the first compile.
    code = "import sys, dynajit.compiler; print(sorted(m for m in ('torch._dynamo', 'functorch.compile') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
