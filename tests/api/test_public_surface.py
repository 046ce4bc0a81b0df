"""The public surface: every name of ``dynajit.compiler`` and ``dynajit._dynamo``, documented and marked.

Removing a name, or its documentation, fails here on purpose: users depend on both.
"""

from __future__ import annotations

import inspect
import warnings

import pytest

from dynajit import _dynamo, compiler

PUBLIC = {
    "compile",
    "reset",
    "allow_in_graph",
    "substitute_in_graph",
    "assume_constant_result",
    "list_backends",
    "disable",
    "set_stance",
    "is_compiling",
    "is_dynamo_compiling",
    "is_exporting",
    "explain",
    "config",
    "set_logs",
    "inductor_list_mode_options",
    "inductor_list_options",
    "cudagraph_mark_step_begin",
    "StrictModeError",
}

PRIVATE = {
    "optimize",
    "optimize_assert",
    "OptimizedModule",
    "export",
    "explain",
    "reset",
    "disable",
    "allow_in_graph",
    "disallow_in_graph",
    "graph_break",
    "nonstrict_trace",
    "assume_constant_result",
    "mark_dynamic",
    "maybe_mark_dynamic",
    "mark_static",
    "mark_static_address",
    "register_backend",
    "lookup_backend",
    "list_backends",
    "is_compiling",
    "set_stance",
    "config",
}

# Private names with a public counterpart, other than ``config`` (an object, not a function).
DEPRECATED_FUNCTIONS = (PRIVATE & PUBLIC) - {"config"}


def test_public_namespace_exports_exactly_the_documented_names():
    assert set(compiler.__all__) == PUBLIC
    for name in PUBLIC:
        assert hasattr(compiler, name), name


def test_private_namespace_keeps_every_name():
    assert set(_dynamo.__all__) == PRIVATE
    for name in PRIVATE:
        assert hasattr(_dynamo, name), name


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_names_have_full_docstrings(name):
    doc = inspect.getdoc(getattr(compiler, name)) or ""
    assert len(doc.splitlines()) >= 3, f"dynajit.compiler.{name} needs a full docstring"
    assert "Example" in doc, f"dynajit.compiler.{name}'s docstring needs an example"
    if inspect.isfunction(getattr(compiler, name)):
        assert "Returns:" in doc, f"dynajit.compiler.{name}'s docstring must say what it returns"


@pytest.mark.parametrize("name", sorted(PRIVATE))
def test_private_names_have_docstrings(name):
    doc = inspect.getdoc(getattr(_dynamo, name)) or ""
    assert doc.strip(), f"dynajit._dynamo.{name} lost its docstring"


@pytest.mark.parametrize("name", sorted(DEPRECATED_FUNCTIONS))
def test_aliases_are_deprecated_for_type_checkers_and_in_docs_but_not_at_run_time(name):
    alias, public = getattr(_dynamo, name), getattr(compiler, name)
    assert alias is not public, "marking the alias must not mark the public function"
    assert f"use dynajit.compiler.{name}" in alias.__deprecated__
    assert not hasattr(public, "__deprecated__")
    assert "deprecated" in alias.__doc__.lower()
    assert public.__doc__ in alias.__doc__  # the public documentation, after the deprecation note
    assert inspect.signature(alias).parameters.keys() == inspect.signature(public).parameters.keys()


def test_names_without_a_public_counterpart_are_not_deprecated():
    for name in PRIVATE - PUBLIC:
        assert not hasattr(getattr(_dynamo, name), "__deprecated__"), name


def test_private_config_is_the_public_config():
    assert _dynamo.config is compiler.config


def test_calling_a_deprecated_alias_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _dynamo.list_backends(exclude_tags=None) == compiler.list_backends(exclude_tags=None)


def test_each_alias_carries_a_literal_deprecation_that_type_checkers_can_read():
    """Type checkers read ``@deprecated("...")`` only with a string literal, on the ``def`` itself."""
    import ast

    from dynajit._dynamo import _aliases

    tree = ast.parse(inspect.getsource(_aliases))
    marked = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "deprecated":
                    (message,) = decorator.args
                    assert isinstance(message, ast.Constant) and isinstance(message.value, str), node.name
                    category = {kw.arg: kw.value for kw in decorator.keywords}["category"]
                    assert isinstance(category, ast.Constant) and category.value is None, node.name
                    marked[node.name] = message.value
    assert set(marked) == DEPRECATED_FUNCTIONS
    for name, message in marked.items():
        assert f"use dynajit.compiler.{name}" in message
