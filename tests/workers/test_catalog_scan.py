"""A full catalog pass reads the subscription sets of a bounded slice of the partitions."""

from __future__ import annotations

from workers.catalog import scan_slice


def test_a_small_catalog_is_read_whole_every_pass():
    topics = {"t/a": 4, "t/b": 0, "t/c": 10}
    scan, start = scan_slice(topics, set(), 0, budget=100)
    assert scan == ["t/a", "t/b", "t/c"]
    assert scan_slice(topics, set(), start, budget=100)[0] == ["t/a", "t/b", "t/c"]


def test_a_large_catalog_is_read_in_turns_and_marked_topics_every_pass():
    topics = {f"t/{i:03}": 100 for i in range(100)}  # 10,000 partitions
    seen: list[str] = []
    start = 0
    for _ in range(5):
        scan, start = scan_slice(topics, {"t/099"}, start, budget=2_000)
        assert scan[0] == "t/099"  # marked: read in every pass
        assert sum(topics[name] for name in scan[1:]) <= 2_000
        seen += scan[1:]
    # Five passes of 2,000 partitions cover the 10,000 (t/099 read as marked).
    assert set(seen) | {"t/099"} == set(topics)
    assert scan_slice(topics, set(), start, budget=2_000)[0][0] == "t/000"  # round again
