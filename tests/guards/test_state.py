"""GLOBAL_STATE and BACKEND_MATCH: a hit in the state they were made in, a miss after each change."""

import contextlib

import pytest
import torch
import torch.utils._python_dispatch

from dynajit.guards import GuardSet, backend_match, global_module_hooks, global_state, process_state


def compiled(*guards):
    return GuardSet(guards).compile((), {})


@contextlib.contextmanager
def default_dtype(dtype):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


# torch.use_deterministic_algorithms also imports and sets inductor's config (seconds); the C setter is the state.
_set_deterministic = torch._C._set_deterministic_algorithms


@contextlib.contextmanager
def deterministic(warn_only=False):
    previous = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    _set_deterministic(True, warn_only=warn_only)
    try:
        yield
    finally:
        _set_deterministic(previous[0], warn_only=previous[1])


class _PassThrough(torch.utils._python_dispatch.TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (torch.no_grad, "global state grad mode: expected True, got False"),
        (lambda: default_dtype(torch.float64), "global state default dtype: expected float32, got float64"),
        (deterministic, "global state deterministic algorithms: expected False, got True"),
        (lambda: torch.autocast("cpu"), "global state autocast: expected False, got True"),
        (_PassThrough, "global state torch dispatch modes: expected 0, got 1"),
    ],
)
def test_global_state_misses_after_each_change(change, reason):
    c = compiled(global_state())
    assert c.check()
    with change():
        assert not c.check()
        assert c.failure_reason() == reason
    assert c.check()


def test_global_state_made_under_autocast_checks_device_and_dtype():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        c = compiled(global_state())
        assert c.check()
    assert c.failure_reason() == "global state autocast(cpu) enabled: expected True, got False"
    with torch.autocast("cpu", dtype=torch.float16):
        assert c.failure_reason() == "global state autocast(cpu) dtype: expected bfloat16, got float16"


def test_global_state_made_under_no_grad_hits_only_there():
    with torch.no_grad():
        c = compiled(global_state())
        assert c.check()
    assert not c.check()


def test_global_state_sees_functorch_transforms():
    c = compiled(global_state())
    results = []
    torch.vmap(lambda t: results.append(c.check()) or t)(torch.zeros(2, 1))
    assert results == [False]


def test_backend_match_checks_identity_of_the_running_backend():
    def eager(gm, example_inputs):
        return gm

    def other(gm, example_inputs):
        return gm

    running = [eager]
    c = compiled(backend_match(lambda: running[0], eager))
    assert c.check()
    running[0] = other
    assert not c.check()
    assert c.failure_reason() == "backend changed: expected eager, got other"


def test_backend_match_needs_a_function():
    with pytest.raises(TypeError, match="current backend"):
        backend_match(None, print)


def test_deterministic_warn_only_is_checked_while_deterministic_is_on():
    with deterministic(warn_only=True):
        c = compiled(global_state())
        assert c.check()
        with deterministic(warn_only=False):
            assert c.failure_reason() == "global state deterministic algorithms warn_only: expected True, got False"
        assert c.check()


@contextlib.contextmanager
def default_autocast_dtype(device, dtype):
    previous = torch.get_autocast_dtype(device)
    torch.set_autocast_dtype(device, dtype)
    try:
        yield
    finally:
        torch.set_autocast_dtype(device, previous)


def test_global_state_ignores_the_autocast_dtype_while_autocast_is_off():
    c = compiled(global_state())
    with default_autocast_dtype("cpu", torch.float16):
        assert c.check()


def test_global_state_checks_the_autocast_dtypes_it_is_asked_for_while_autocast_is_off():
    guard = global_state(autocast_dtype_devices=["cpu", "cpu"])
    assert guard.detail.endswith("autocast=off, autocast(cpu) dtype=bfloat16")
    assert guard != global_state() and guard == global_state(["cpu"])
    c = compiled(guard)
    assert c.check()
    with default_autocast_dtype("cpu", torch.float16):
        assert c.failure_reason() == "global state autocast(cpu) dtype: expected bfloat16, got float16"
    with default_autocast_dtype("cuda", torch.bfloat16):
        assert c.check()
    assert "'cpu') is" in c.code


def test_global_state_checks_an_autocast_dtype_once():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        guard = global_state(autocast_dtype_devices=["cpu"])
        assert guard == global_state() and len(guard.checks) == len(global_state().checks)
        c = compiled(guard)
    with torch.autocast("cpu", dtype=torch.bfloat16), default_autocast_dtype("cuda", torch.bfloat16):
        assert c.check()  # cuda's autocast is off: its dtype is not read


def test_global_module_hooks():
    guard = global_module_hooks()
    compiled = GuardSet([guard]).compile((), {})
    assert compiled.check()
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: o)
    try:
        assert not compiled.check()
        assert compiled.failure_reason() == "global nn.Module hooks were registered"
    finally:
        handle.remove()
    assert compiled.check()
    assert str(GuardSet([guard])) == "- global '' GLOBAL_MODULE_HOOKS"


def test_global_state_made_under_no_grad_misses_under_inference_mode():
    # Both disable gradients; a trace answered is_inference() and is_inference_mode_enabled() for one of them.
    with torch.no_grad():
        c = compiled(global_state())
        assert c.check()
    with torch.inference_mode():
        assert not c.check()
        assert c.failure_reason() == "global state inference mode: expected False, got True"
        made_inside = compiled(global_state())
    with torch.no_grad():
        assert not made_inside.check()
        assert made_inside.failure_reason() == "global state inference mode: expected True, got False"


def test_process_state_misses_when_the_read_changes():
    threads = torch.get_num_threads()
    c = compiled(process_state(torch.get_num_threads))
    assert c.check()
    torch.set_num_threads(threads + 1)
    try:
        assert not c.check()
        assert c.failure_reason() == f"global state get_num_threads(): expected {threads}, got {threads + 1}"
    finally:
        torch.set_num_threads(threads)
    assert c.check()


def test_process_state_passes_its_arguments():
    c = compiled(process_state(torch.get_autocast_dtype, ("cpu",)))
    assert c.check()
    with torch.autocast("cpu", dtype=torch.float16):
        assert not c.check()
