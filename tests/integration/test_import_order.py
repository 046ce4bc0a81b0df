"""Every module of the packages imports first, in a fresh process: a tool that imports a private module it needs
(``dynajit.capture._symbolic.output``) must not meet an import cycle the usual order hides."""

import subprocess
import sys

# Each package's modules are imported one after another in one process, the package's modules forgotten before
# each, so each import runs first. inductor-lite is left out: importing it registers torch operators, which a
# second import in one process would register again.
_SCRIPT = """
import importlib, pkgutil, sys
import torch
failed = []
for prefix in sys.argv[1:]:
    names = sorted(m.name for m in pkgutil.walk_packages(importlib.import_module(prefix).__path__, prefix + "."))
    for name in [prefix, *names]:
        for loaded in [m for m in sys.modules if m == prefix or m.startswith(prefix + ".")]:
            del sys.modules[loaded]
        try:
            importlib.import_module(name)
        except Exception as err:
            failed.append(f"{name}: {type(err).__name__}: {err}")
print("\\n".join(failed))
"""


def test_each_module_imports_first():
    packages = ["dynajit.fxgraph", "dynajit.guards", "dynajit.capture", "dynajit.compiler", "dynajit._dynamo"]
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *packages], capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == ""
