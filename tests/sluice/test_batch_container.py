"""The batch container alone: how messages are grouped and in what order the entries go.

No Redis: ``sluice.batching`` is pure.  What the producer makes of it against a real worker is
in ``tests/workers/test_key_based_batching.py``."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from sluice import BatchingType, InvalidConfiguration
from sluice.batching import BatchContainer, as_batching_type


@dataclass
class Message:
    sequence: int
    key: str | None = None
    ordering_key: str | None = None


def fill(kind: BatchingType, messages: list[Message]) -> BatchContainer[Message]:
    container: BatchContainer[Message] = BatchContainer(kind)
    for m in messages:
        container.add(container.group_key(m.key, m.ordering_key), m, 10, float(m.sequence))
    return container


def test_key_based_groups_by_ordering_key_then_partition_key_then_the_empty_key():
    messages = [
        Message(0, "a"),
        Message(1, "b"),
        Message(2, None),
        Message(3, "a"),
        Message(4, "b", ordering_key="a"),  # its ordering key puts it with "a"
        Message(5, ""),  # an empty key is no key
        Message(6, "b"),
    ]
    container = fill(BatchingType.KeyBased, messages)
    assert (container.count, container.size, container.started) == (7, 70, 0.0)
    batches = [[m.sequence for m in batch] for batch in container.take()]
    assert batches == [[0, 3, 4], [1, 6], [2, 5]]  # by first sequence id, order kept inside
    assert not container and container.take() == [] and container.size == 0


def test_batches_go_by_their_first_sequence_id_not_by_arrival_of_the_key():
    # An explicit sequence id may make a later key's batch start lower.
    container = fill(BatchingType.KeyBased, [Message(10, "x"), Message(3, "y"), Message(11, "x")])
    assert [[m.sequence for m in b] for b in container.take()] == [[3], [10, 11]]


def test_default_batching_is_one_batch_whatever_the_keys():
    container = fill(BatchingType.Default, [Message(0, "a"), Message(1, "b"), Message(2)])
    assert [[m.sequence for m in b] for b in container.take()] == [[0, 1, 2]]


class PulsarsOwn:
    """Stands for pulsar-client's enum member: recognised by its name."""

    def __init__(self, name: str) -> None:
        self.name = name


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (BatchingType.KeyBased, BatchingType.KeyBased),
        (BatchingType.Default, BatchingType.Default),
        ("Default", BatchingType.Default),
        (PulsarsOwn("KeyBased"), BatchingType.KeyBased),
    ],
)
def test_batching_types_accepted(value, expected):
    assert as_batching_type(value) is expected


@pytest.mark.parametrize("value", [1, None, "keybased", "KEY_BASED", PulsarsOwn("Other"), object()])
def test_anything_else_is_an_invalid_configuration(value):
    with pytest.raises(InvalidConfiguration, match="batching_type"):
        as_batching_type(value)
