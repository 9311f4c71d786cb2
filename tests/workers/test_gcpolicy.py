"""``workers.gcpolicy``: objects that outlive a few young collections, as a worker's
per-period objects do, stay out of the oldest generation (whose collection pauses the
worker)."""

from __future__ import annotations

import gc
import weakref

import pytest

from workers import gcpolicy
from workers.gcpolicy import MIDDLE, YOUNG, HeapSettler, tune_collector


@pytest.fixture(autouse=True)
def untuned(monkeypatch):
    """``tune_collector`` marks the process as a worker's: undone after each test, so the
    in-process workers of later tests leave this process's collector alone."""
    monkeypatch.setattr(gcpolicy, "_tuned", False)


def promoted(tune: bool) -> int:
    """How many of 1,000 objects that live through ``4 * YOUNG`` allocations of others end
    in the oldest generation."""
    saved = gc.get_threshold()
    try:
        if tune:
            tune_collector()
        gc.collect()
        kept = [[] for _ in range(1000)]
        others = [[] for _ in range(4 * YOUNG)]
        oldest = {id(o) for o in gc.get_objects(2)}
        del others
        return sum(id(k) in oldest for k in kept)
    finally:
        gc.set_threshold(*saved)


def test_the_thresholds():
    saved = gc.get_threshold()
    try:
        tune_collector()
        assert gc.get_threshold() == (YOUNG, MIDDLE, saved[2])
    finally:
        gc.set_threshold(*saved)


def test_objects_living_a_few_young_collections_are_not_promoted():
    assert promoted(tune=False) == 1000  # the interpreter's defaults promote them all
    assert promoted(tune=True) == 0


def test_the_heap_is_settled_once_the_dispatchers_stop_changing():
    """Settled (collected, then frozen) once the count moved by enough and then held for the
    quiet time; not again until it moves by a tenth."""
    settler = HeapSettler(enabled=True)
    assert not settler.due(100, 0.0) and not settler.due(100, 10.0)  # too few to matter
    assert not settler.due(10_000, 10.0)  # still changing
    assert not settler.due(10_000, 11.0)
    try:
        assert settler.observe(10_000, 12.5)
        assert gc.get_freeze_count() > 0 and settler.settled_at_count == 10_000
        assert not settler.observe(10_500, 20.0) and not settler.observe(10_500, 30.0)
        assert not settler.observe(11_000, 40.0)
        assert settler.observe(11_000, 42.0)
        assert settler.settlings == 2
    finally:
        gc.unfreeze()


def test_a_worker_inside_another_program_leaves_its_collector_alone():
    # Not tuned (this test process is no ``sluice worker``): never settled, never frozen.
    settler = HeapSettler()
    assert not settler.enabled
    assert not settler.observe(10_000, 0.0) and not settler.observe(10_000, 10.0)
    assert settler.settlings == 0 and gc.get_freeze_count() == 0


class _Cycle:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_a_grown_heap_is_frozen_without_a_full_collection_a_shrunk_one_with_it():
    """Dispatchers added: the young generation is collected and the heap frozen, no full
    collection (at 10,000 subscriptions one is a pause of half a second).  Dispatchers gone:
    the frozen objects are handed back and collected whole, so the cycles of the stopped
    ones (frozen while they ran) are freed."""
    settler = HeapSettler(enabled=True)
    collected: list[int] = []

    def note(phase: str, info: dict) -> None:
        if phase == "start":
            collected.append(info["generation"])

    gc.callbacks.append(note)
    try:
        settler.due(10_000, 0.0)
        assert settler.observe(10_000, 5.0)
        assert collected and max(collected) == 0
        leftover = _Cycle()
        gc.freeze()  # as if frozen by that settling while it was alive
        probe = weakref.ref(leftover)
        del leftover
        collected.clear()
        settler.due(8_000, 10.0)
        assert settler.observe(8_000, 15.0)
        assert 2 in collected
        assert probe() is None  # its cycle was collected
    finally:
        gc.callbacks.remove(note)
        gc.unfreeze()


def test_a_heap_that_grew_after_a_dip_is_collected_whole():
    """Dispatchers stopped, then more started: the count ends higher than at the last
    settling, but the stopped ones' cycles may be frozen, so the collection is full."""
    settler = HeapSettler(enabled=True)
    collected: list[int] = []

    def note(phase: str, info: dict) -> None:
        if phase == "start":
            collected.append(info["generation"])

    try:
        settler.due(10_000, 0.0)
        assert settler.observe(10_000, 5.0)
        gc.callbacks.append(note)
        settler.due(9_000, 6.0)  # some stopped ...
        settler.due(12_000, 7.0)  # ... more started
        assert settler.observe(12_000, 10.0)
        assert 2 in collected
    finally:
        if note in gc.callbacks:
            gc.callbacks.remove(note)
        gc.unfreeze()
