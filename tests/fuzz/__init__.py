"""A differential fuzzer for dynajit: random tensor programs, run eagerly and compiled, failures shrunk to repros.

``generator`` writes programs (``features`` switches their ingredients),
``runner`` runs and compares them, ``shrink`` minimises a failing one,
``cli`` (``python -m tests.fuzz``) drives a run. ``test_fuzz.py`` is the CI
budget.
"""
