"""The backend registry: run-time registration, lazy entry points, re-reading, listing and errors."""

from __future__ import annotations

import importlib.metadata
import textwrap
from pathlib import Path

import pytest

from dynajit import _dynamo
from dynajit.compiler import _backends, _registry, list_backends

pytestmark = pytest.mark.usefixtures("clean_registry")


def backend_a(gm, example_inputs):
    return gm.forward


def backend_b(gm, example_inputs):
    return gm.forward


def test_register_as_call_returns_the_backend_and_makes_it_findable():
    assert _dynamo.register_backend(backend_a, "mine") is backend_a
    assert _dynamo.lookup_backend("mine") is backend_a
    assert "mine" in list_backends()


def test_register_accepts_the_name_first_order():
    assert _dynamo.register_backend("named_first", backend_a) is backend_a
    assert _dynamo.lookup_backend("named_first") is backend_a


def test_register_as_decorator_with_and_without_arguments():
    @_dynamo.register_backend
    def plain_backend(gm, example_inputs):
        return gm.forward

    @_dynamo.register_backend(name="renamed", tags=("experimental",))
    def tagged_backend(gm, example_inputs):
        return gm.forward

    assert _dynamo.lookup_backend("plain_backend") is plain_backend
    assert _dynamo.lookup_backend("renamed") is tagged_backend
    assert "plain_backend" in list_backends()
    assert "renamed" not in list_backends()
    assert "renamed" in list_backends(exclude_tags=None)
    assert "renamed" in list_backends(exclude_tags=("debug",))


def test_registering_a_taken_name_for_another_backend_is_an_error():
    _dynamo.register_backend(backend_a, "taken")
    _dynamo.register_backend(backend_a, "taken")  # the same backend again is fine
    with pytest.raises(ValueError, match="'taken' is already registered"):
        _dynamo.register_backend(backend_b, "taken")


def test_register_rejects_a_non_callable():
    with pytest.raises(TypeError, match="expects a callable backend"):
        _dynamo.register_backend(42, "number")


def test_lookup_passes_a_callable_through():
    assert _dynamo.lookup_backend(backend_b) is backend_b


def test_builtin_backends_come_from_entry_points_and_are_tagged_debug():
    assert _dynamo.lookup_backend("eager") is _backends.eager
    assert _dynamo.lookup_backend("aot_eager") is _backends.aot_eager
    assert "eager" not in list_backends()
    assert {"eager", "aot_eager", "inductor"} <= set(list_backends(exclude_tags=None))
    assert "inductor" in list_backends()


def test_entry_points_are_read_lazily_on_the_first_name_lookup(monkeypatch):
    reads = []
    real = _registry._read_entry_points
    monkeypatch.setattr(_registry, "_read_entry_points", lambda refresh: reads.append(refresh) or real(refresh))
    _dynamo.register_backend(backend_a, "registered_only")
    assert _dynamo.lookup_backend("registered_only") is backend_a
    assert reads == []  # a registered name needs no entry point
    _dynamo.lookup_backend("eager")
    _dynamo.lookup_backend("aot_eager")
    assert reads == [False]  # read once, then remembered


def test_unknown_name_rereads_the_entry_points_then_lists_the_known_names(monkeypatch):
    reads = []
    real = _registry._read_entry_points
    monkeypatch.setattr(_registry, "_read_entry_points", lambda refresh: reads.append(refresh) or real(refresh))
    _dynamo.register_backend(backend_a, "mine")
    with pytest.raises(_registry.BackendNotFound) as info:
        _dynamo.lookup_backend("eagr")
    assert reads == [False, True]
    message = str(info.value)
    assert "unknown backend 'eagr'" in message
    assert "Did you mean 'eager'" in message
    for known in ("aot_eager", "eager", "inductor", "mine"):
        assert known in message
    assert isinstance(info.value, LookupError)


def test_lookup_rejects_a_non_name_non_callable():
    with pytest.raises(TypeError, match="backend must be a name or a callable"):
        _dynamo.lookup_backend(3)


def _install_distribution(root: Path, module: str, entry_points: str) -> None:
    (root / f"{module}.py").write_text(
        textwrap.dedent(
            """
            calls = []

            def third_party_backend(gm, example_inputs):
                calls.append(len(example_inputs))
                return gm.forward

            broken = None
            """
        )
    )
    dist_info = root / f"{module}-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(f"[dynajit.backends]\n{entry_points}\n")


def test_third_party_backend_from_a_real_entry_points_file_is_found_without_restarting(tmp_path, monkeypatch):
    assert "third_party" not in list_backends(exclude_tags=None)  # entry points read before installing
    _install_distribution(tmp_path, "dynajit_plugin_x", "third_party = dynajit_plugin_x:third_party_backend")
    monkeypatch.syspath_prepend(str(tmp_path))
    names = {ep.name for ep in importlib.metadata.entry_points(group="dynajit.backends")}
    assert "third_party" in names
    backend = _dynamo.lookup_backend("third_party")  # found by re-reading on the miss
    import dynajit_plugin_x

    assert backend is dynajit_plugin_x.third_party_backend
    assert "third_party" in list_backends()


def test_an_entry_point_that_fails_to_load_is_a_clear_error(tmp_path, monkeypatch):
    _install_distribution(
        tmp_path, "dynajit_plugin_y", "missing_attr = dynajit_plugin_y:nope\nnot_callable = dynajit_plugin_y:broken"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="'missing_attr' is declared by entry point 'dynajit_plugin_y:nope'"):
        _dynamo.lookup_backend("missing_attr")
    with pytest.raises(TypeError, match="is not callable"):
        _dynamo.lookup_backend("not_callable")
