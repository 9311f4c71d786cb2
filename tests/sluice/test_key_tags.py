"""Partition hash tags: the tabulated suffix search finds what hashing every candidate finds.

Keys already stored in Redis carry these tags, so the fast search must give exactly the
suffix the plain search (format ``body~K``, hash it, try the next K) gives, for every name.
"""

from __future__ import annotations

import random

from sluice.protocol import keys
from sluice.protocol.names import TopicName


def reference_tag(tenant: str, namespace: str, local: str) -> str:
    """The tag as first defined: every candidate suffix formatted and hashed in full."""
    name = TopicName(tenant, namespace, local)
    body = f"{tenant}/{namespace}/{local}"
    if name.partition_index < 0:
        return "{" + body + "}"
    base = keys.slot_of(f"{tenant}/{namespace}/{name.base.local}")
    low = (base + name.partition_index * keys.SPREAD_STRIDE) % keys.SLOTS - keys.SPREAD_WINDOW // 2
    suffix = 0
    while (keys.slot_of(f"{body}~{suffix}") - low) % keys.SLOTS >= keys.SPREAD_WINDOW:
        suffix += 1
    return "{" + f"{body}~{suffix}" + "}"


def test_tags_match_the_plain_search() -> None:
    generator = random.Random(7)
    names = [("bench", "ns", "t"), ("a", "b", "x-partition-")]
    names += [("bench", "ns", f"topic{t}-partition-{i}") for t in range(3) for i in range(1500)]
    names += [
        (
            f"tenant{generator.randrange(50)}",
            "ns-1",
            f"t.{generator.randrange(10**6)}-partition-{i}",
        )
        for i in range(3000)
    ]
    for tenant, namespace, local in names:
        fast = keys.tag(TopicName(tenant, namespace, local))
        assert fast == reference_tag(tenant, namespace, local), (tenant, namespace, local)


def test_the_smallest_suffix_is_found_for_any_window() -> None:
    body = "bench/ns/t-partition-0"
    for low in range(0, keys.SLOTS, 1024):
        suffix = keys._spread_suffix(body, low)
        slot = keys.slot_of(f"{body}~{suffix}")
        assert (slot - low) % keys.SLOTS < keys.SPREAD_WINDOW
        assert all(
            (keys.slot_of(f"{body}~{k}") - low) % keys.SLOTS >= keys.SPREAD_WINDOW
            for k in range(suffix)
        )
