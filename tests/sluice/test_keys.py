"""The partition hash tag: the quick search finds exactly the tag the plain definition gives.

Clients and workers compute every key of a partition from its tag, so the tag is part of the
wire protocol.  ``keys._tag`` finds the first suffix that lands the partition in its window of
slots without hashing each try; this checks it against the definition (try 0, 1, 2, ... with
``slot_of``) for partitions of many topics.
"""

from __future__ import annotations

import random

from sluice.protocol import keys
from sluice.protocol.names import TopicName


def plain_tag(partition: TopicName) -> str:
    """The definition: the first suffix whose slot is within the window around the target."""
    body = f"{partition.tenant}/{partition.namespace}/{partition.local}"
    if partition.partition_index < 0:
        return "{" + body + "}"
    base = partition.base
    topic_slot = keys.slot_of(f"{partition.tenant}/{partition.namespace}/{base.local}")
    target = (topic_slot + partition.partition_index * keys.SPREAD_STRIDE) % keys.SLOTS
    low = target - keys.SPREAD_WINDOW // 2
    suffix = 0
    while (keys.slot_of(f"{body}~{suffix}") - low) % keys.SLOTS >= keys.SPREAD_WINDOW:
        suffix += 1
    return "{" + f"{body}~{suffix}" + "}"


def test_the_quick_tag_search_matches_the_definition():
    rng = random.Random(7)
    alphabet = "abcxyz-_.0123456789éü"
    partitions = [TopicName("acme", "orders", "plain")]
    for t in range(40):
        local = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        base = TopicName(f"tenant{t % 3}", f"ns{t % 5}", local)
        partitions += [base.partition(i) for i in rng.sample(range(20_000), 250)]
    mismatches = [p.full for p in partitions if keys.tag(p) != plain_tag(p)]
    assert mismatches == []


def test_the_smallest_suffix_is_found_for_any_window():
    body = "bench/ns/t-partition-0"
    head = keys.crc_hqx(f"{body}~".encode(), 0)
    for low in range(0, keys.SLOTS, 512):
        suffix = keys._first_suffix(head, low)
        assert suffix is not None
        assert (keys.slot_of(f"{body}~{suffix}") - low) % keys.SLOTS < keys.SPREAD_WINDOW
        assert all(
            (keys.slot_of(f"{body}~{k}") - low) % keys.SLOTS >= keys.SPREAD_WINDOW
            for k in range(suffix)
        )
