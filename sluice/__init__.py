"""Sluice: Pulsar-style dispatch throttling for Redis Streams.

This package is Sluice's public face: the producer/consumer client whose API mirrors the
``pulsar-client`` package (change the import, keep the code), and the ``sluice`` and
``sluice-admin`` command lines::

    import sluice

    client = sluice.Client("redis://localhost:6650")
    producer = client.create_producer("persistent://acme/orders/created")
    producer.send(b"hello")
    consumer = client.subscribe("persistent://acme/orders/created", "audit",
                                consumer_type=sluice.ConsumerType.Shared)
    msg = consumer.receive(timeout_millis=1000)
    consumer.acknowledge(msg)
"""

from sluice.batching import BatchingType
from sluice.client import Client
from sluice.consumer import Consumer, ConsumerType, DeadLetterPolicy, InitialPosition
from sluice.errors import (
    AlreadyClosed,
    AuthenticationError,
    AuthorizationError,
    ConnectError,
    ConsumerBusy,
    InvalidConfiguration,
    MessageTooBig,
    NamespaceNotFound,
    NotAllowedError,
    NotSupported,
    ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException,
    ProducerBusy,
    ProducerQueueIsFull,
    SluiceException,
    SubscribeRateLimited,
    SubscriptionBusy,
    Timeout,
    TooManyRequests,
    TopicNotFound,
    UnsupportedVersionError,
)
from sluice.keyshared import ConsumerKeySharedPolicy, KeySharedMode
from sluice.message import Message, MessageId
from sluice.producer import Producer, Result
from sluice.reader import Reader
from sluice.routing import PartitionsRoutingMode
from sluice.session import AuthenticationToken

__version__ = "0.1.0"

__all__ = [
    "AlreadyClosed",
    "AuthenticationError",
    "AuthenticationToken",
    "AuthorizationError",
    "BatchingType",
    "Client",
    "ConnectError",
    "Consumer",
    "ConsumerBusy",
    "ConsumerKeySharedPolicy",
    "ConsumerType",
    "DeadLetterPolicy",
    "InitialPosition",
    "InvalidConfiguration",
    "KeySharedMode",
    "Message",
    "MessageId",
    "MessageTooBig",
    "NamespaceNotFound",
    "NotAllowedError",
    "NotSupported",
    "PartitionsRoutingMode",
    "Producer",
    "ProducerBlockedQuotaExceededError",
    "ProducerBlockedQuotaExceededException",
    "ProducerBusy",
    "ProducerQueueIsFull",
    "Reader",
    "Result",
    "SluiceException",
    "SubscribeRateLimited",
    "SubscriptionBusy",
    "Timeout",
    "TooManyRequests",
    "TopicNotFound",
    "UnsupportedVersionError",
]
