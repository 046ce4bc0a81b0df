"""A frame's conversion runs without full collections: the backend sees the deferred thresholds, which come back."""

from __future__ import annotations

import gc

import pytest
import torch

from dynajit import capture


@pytest.fixture(autouse=True)
def _thresholds():
    saved = gc.get_threshold()
    capture.reset()
    yield
    gc.set_threshold(*saved)
    capture.reset()


def _recording_backend(seen):
    def backend(gm, example_inputs):
        seen.append(gc.get_threshold())
        return gm.forward

    return backend


def test_a_compile_runs_without_full_collections_and_restores_the_thresholds():
    gc.set_threshold(500, 7, 9)
    seen = []
    compiled = capture.optimize(_recording_backend(seen))(lambda x: x.sin() + 1)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x.sin() + 1)
    assert seen == [(500, 1 << 30, 1 << 30)]
    assert gc.get_threshold() == (500, 7, 9)


def test_a_program_that_turned_collection_off_keeps_it_off():
    gc.set_threshold(0, 7, 9)
    seen = []
    capture.optimize(_recording_backend(seen))(lambda x: x * 2)(torch.ones(2))
    assert seen == [(0, 7, 9)] and gc.get_threshold() == (0, 7, 9)


def test_the_young_generations_are_collected_once_when_the_compile_ends():
    collections = []

    def note(phase, info):
        if phase == "start":
            collections.append((info["generation"], gc.get_threshold()[1]))

    seen = []
    compiled = capture.optimize(_recording_backend(seen))(lambda x: x.cos() * 3)
    gc.callbacks.append(note)
    try:
        compiled(torch.randn(4))
    finally:
        gc.callbacks.remove(note)
    assert all(generation == 0 for generation, middle in collections if middle == 1 << 30)
    assert [generation for generation, middle in collections if middle != 1 << 30][:1] == [1]
