"""Shared fixtures: a persistent kernel cache so reruns of the suite reuse built libraries."""

import os
import tempfile

os.environ.setdefault("DYNAJIT_CACHE_DIR", os.path.join(tempfile.gettempdir(), "dynajit-test-cache"))
