"""Keep the five distributions on the one version in ``VERSION``, pinned exactly to each other.

``python tools/check_versions.py`` fails listing every drift;
``python tools/check_versions.py --set 0.2.0`` writes a new version everywhere.
"""

from __future__ import annotations

import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYPROJECTS = sorted((ROOT / "packages").glob("*/pyproject.toml"))
_PIN = re.compile(r"^(dynajit-[a-z-]+)(\[[a-z,]+\])?\s*(==\s*([^;\s]+))?")


def problems(version: str) -> list[str]:
    """Every place where a distribution's version or an internal pin differs from ``version``."""
    found = []
    for path in PYPROJECTS:
        project = tomllib.loads(path.read_text())["project"]
        where = path.relative_to(ROOT)
        if project["version"] != version:
            found.append(f"{where}: version {project['version']} != VERSION {version}")
        requirements = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            requirements += extra
        for requirement in requirements:
            match = _PIN.match(requirement)
            if match and match.group(4) != version:
                found.append(f"{where}: {requirement!r} must pin =={version}")
    return found


def set_version(version: str) -> None:
    """Rewrite every pyproject's version and internal pins to ``version``."""
    (ROOT / "VERSION").write_text(version + "\n")
    for path in PYPROJECTS:
        text = re.sub(r'(?m)^version = "[^"]+"', f'version = "{version}"', path.read_text())
        text = re.sub(r'"(dynajit-[a-z-]+(\[[a-z,]+\])?)==[^";]+', rf'"\1=={version}', text)
        path.write_text(text)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--set"] and len(argv) == 2:
        set_version(argv[1])
    version = (ROOT / "VERSION").read_text().strip()
    found = problems(version)
    for line in found:
        print(line, file=sys.stderr)
    if not found:
        print(f"all {len(PYPROJECTS)} distributions at {version}, internal pins exact")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
