"""Only young collections run while full collections are deferred; the young ones are collected when the last
deferring thread leaves; the thresholds come back."""

from __future__ import annotations

import gc
import itertools
import threading

import pytest

from dynajit.fxgraph import full_collections_deferred


@pytest.fixture(autouse=True)
def _thresholds():
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_thresholds_are_raised_inside_and_restored_after():
    gc.set_threshold(500, 7, 9)
    with full_collections_deferred():
        assert gc.get_threshold() == (500, 1 << 30, 1 << 30)
        with full_collections_deferred():  # nested: still deferred, restored only by the outermost
            pass
        assert gc.get_threshold() == (500, 1 << 30, 1 << 30)
    assert gc.get_threshold() == (500, 7, 9)


def test_a_program_that_turned_collection_off_keeps_it_off_and_gets_no_collection():
    gc.set_threshold(0, 7, 9)
    collections = []
    gc.callbacks.append(lambda phase, info: collections.append(info["generation"]))
    try:
        with full_collections_deferred():
            assert gc.get_threshold() == (0, 7, 9)
    finally:
        gc.callbacks.pop()
    assert gc.get_threshold() == (0, 7, 9) and collections == []


def test_overlapping_deferrals_restore_the_thresholds_when_the_last_one_ends():
    gc.set_threshold(600, 5, 4)
    inside, release = threading.Event(), threading.Event()

    def other_compile():
        with full_collections_deferred():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other_compile)
    thread.start()
    inside.wait(10)
    with full_collections_deferred():
        assert gc.get_threshold() == (600, 1 << 30, 1 << 30)
    assert gc.get_threshold() == (600, 1 << 30, 1 << 30)  # the other thread still defers
    release.set()
    thread.join()
    assert gc.get_threshold() == (600, 5, 4)


def test_the_young_generations_are_collected_once_when_the_deferral_ends():
    collections = []

    def note(phase, info):
        if phase == "start":
            collections.append((info["generation"], gc.get_threshold()[1]))

    gc.callbacks.append(note)
    try:
        with full_collections_deferred():
            garbage = [[] for _ in range(5000)]
            for a, b in itertools.pairwise(garbage):
                a.append(b)
                b.append(a)
            del garbage, a, b
    finally:
        gc.callbacks.remove(note)
    # while deferred only the youngest generation is collected; after, one collection of the young two
    assert all(generation == 0 for generation, middle in collections if middle == 1 << 30)
    assert [generation for generation, middle in collections if middle != 1 << 30][:1] == [1]
