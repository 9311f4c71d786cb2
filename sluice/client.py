"""The client: connects to the data plane (a Redis URL) and creates producers and consumers.

Mirrors ``pulsar.Client``: ``Client(service_url)``, ``create_producer``, ``subscribe``,
``get_topic_partitions``, ``close``.  Topic metadata (partition counts) lives in Redis; an
unknown topic is created on first use when the broker allows it (``allowAutoTopicCreation``)
and the namespace has room for it (``maxTopicsPerNamespace``, else ``NotAllowedError``), as
Pulsar does.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from typing import cast

import orjson
import redis
from redis.commands.core import Script
from redis.exceptions import AuthenticationError as RedisAuthenticationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError

from sluice import heartbeats
from sluice.backoff import Backoff, Clock
from sluice.batching import BatchingType, as_batching_type
from sluice.consumer import (
    DEFAULT_CONSUMER_TIMEOUT_MS,
    Consumer,
    ConsumerType,
    DeadLetterPolicy,
    InitialPosition,
)
from sluice.durable import DEFAULT_TIMEOUT_MS as DEFAULT_DURABLE_ACK_TIMEOUT_MS
from sluice.durable import Durability
from sluice.errors import (
    AlreadyClosed,
    AuthenticationError,
    ConnectError,
    InvalidConfiguration,
    NamespaceNotFound,
    NotSupported,
    SluiceException,
    TopicNotFound,
    UnsupportedVersionError,
)
from sluice.keyshared import ConsumerKeySharedPolicy
from sluice.message import Message, MessageId
from sluice.options import refuse_non_defaults
from sluice.producer import Producer
from sluice.protocol import keys
from sluice.protocol.abuse import auto_create_call
from sluice.protocol.connection import connect, is_cluster, raw_client, use_credentials
from sluice.protocol.errors import NotFound, PreconditionFailed
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import SCRIPTS, TOPIC_CREATE
from sluice.protocol.urls import redact_url, with_credentials
from sluice.protocol.version import NEWEST_FIELD, OLDEST_FIELD, ProtocolMismatch, check
from sluice.reader import Reader, reader_consumer
from sluice.refusals import refusal
from sluice.routing import PartitionsRoutingMode
from sluice.session import AuthenticationToken, Session, SessionScript
from sluice.ticker import Ticker
from sluice.tracing import Tracing

log = logging.getLogger(__name__)


def _bytes_schema(schema: object) -> object:
    """None for no schema or pulsar's ``BytesSchema`` (raw bytes, what Sluice carries)."""
    return None if schema is None or type(schema).__name__ == "BytesSchema" else schema


def parse_topic(topic: str) -> TopicName:
    """A topic name as a ``TopicName``; ``InvalidConfiguration`` when malformed."""
    try:
        return TopicName.from_full(topic)
    except PreconditionFailed as exc:
        raise InvalidConfiguration(exc.reason) from None


# pulsar-client's arguments Sluice lacks, with the defaults they are accepted at (in the
# order they are checked).
CLIENT_DEFAULTS: dict[str, object] = {
    "io_threads": 1,
    "message_listener_threads": 1,
    "concurrent_lookup_requests": 50_000,
    "use_tls": False,
    "tls_trust_certs_file_path": None,
    "tls_allow_insecure_connection": False,
    "tls_validate_hostname": False,
    "logger": None,
    "listener_name": None,
    "tls_private_key_file_path": None,
    "tls_certificate_file_path": None,
}
PRODUCER_DEFAULTS: dict[str, object] = {
    "schema": None,
    "compression_type": "NONE",
    "chunking_enabled": False,
    "lazy_start_partitioned_producers": False,
    "encryption_key": None,
    "crypto_key_reader": None,
    "access_mode": "Shared",
}
SUBSCRIBE_DEFAULTS: dict[str, object] = {
    "schema": None,
    "broker_consumer_stats_cache_time_ms": 30_000,
    "is_read_compacted": False,
    "properties": None,
    "pattern_auto_discovery_period": 60,
    "crypto_key_reader": None,
    "replicate_subscription_state_enabled": False,
    "max_pending_chunked_message": 10,
    "auto_ack_oldest_chunked_message_on_queue_full": False,
    "start_message_id_inclusive": False,
    "batch_receive_policy": None,
    "batch_index_ack_enabled": False,
    "regex_subscription_mode": "PersistentOnly",
    "crypto_failure_action": "FAIL",
}
READER_DEFAULTS: dict[str, object] = {
    "schema": None,
    "reader_listener": None,
    "subscription_role_prefix": None,
    "is_read_compacted": False,
    "crypto_key_reader": None,
    "crypto_failure_action": "FAIL",
}


def _check_subscription(
    topics: list[str],
    subscription_name: str,
    receiver_queue_size: int,
    unacked_messages_timeout_ms: int | None,
) -> None:
    """``InvalidConfiguration`` for a subscribe call that cannot work."""
    if not topics:
        raise InvalidConfiguration("at least one topic is required")
    if not subscription_name:
        raise InvalidConfiguration("subscription name is required")
    if receiver_queue_size < 1:
        raise InvalidConfiguration("receiver_queue_size must be >= 1")
    if unacked_messages_timeout_ms is not None and 0 < unacked_messages_timeout_ms < 1000:
        raise InvalidConfiguration("unacked_messages_timeout_ms must be >= 1000")


def _backoff(initial_ms: int, multiplier: float, jitter: float, max_ms: int) -> Backoff:
    """The retry curve of sends a backlog quota refuses (``InvalidConfiguration`` if bad)."""
    try:
        return Backoff(
            initial=initial_ms / 1000, multiplier=multiplier, jitter=jitter, maximum=max_ms / 1000
        )
    except ValueError as exc:
        raise InvalidConfiguration(str(exc)) from None


def _queue_per_partition(queue_size: int, total: int, partitions: int) -> int:
    """Each partition's receiver queue: the whole size for one partition, else a share of
    the total across partitions (at least one, at most the size)."""
    if partitions <= 1:
        return queue_size
    return max(1, min(queue_size, total // partitions))


class Client:
    """Entry point of the client library (``sluice.Client("redis://localhost:6650")``)."""

    def __init__(
        self,
        service_url: str,
        authentication: object = None,
        operation_timeout_seconds: float = 30,
        io_threads: int = 1,
        message_listener_threads: int = 1,
        concurrent_lookup_requests: int = 50_000,
        log_conf_file_path: str | None = None,
        use_tls: bool = False,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = False,
        logger: object = None,
        connection_timeout_ms: int = 10_000,
        listener_name: str | None = None,
        tls_private_key_file_path: str | None = None,
        tls_certificate_file_path: str | None = None,
        *,
        heartbeat_interval_seconds: float | None = None,
        tracer_provider: object = None,
    ) -> None:
        """Connect to the data plane.  ``service_url`` is the admin service's URL
        (``http://sluice-api:8080``: it tells the client where Redis is and, with
        ``authentication=sluice.AuthenticationToken(token)``, gives it Redis credentials that
        carry its role's grants, ``sluice.session``), or a Redis URL (credentials and TLS,
        ``rediss://``, go in it; no ``authentication``).  ``log_conf_file_path`` has no
        effect, as in pulsar-client; the other pulsar-client arguments Sluice lacks raise
        ``NotSupported`` unless left at their defaults (``sluice.options``).  Consumers and
        producers renew their registrations every ``heartbeat_interval_seconds`` (by default
        a fifth of the workers' consumer timeout: 2 s for the default 10 s, at least 1 s)."""
        refuse_non_defaults("Client", CLIENT_DEFAULTS, locals())
        self.service_url = service_url
        self.operation_timeout = operation_timeout_seconds
        if authentication is not None and not isinstance(authentication, AuthenticationToken):
            raise NotSupported("Client: authentication takes a sluice.AuthenticationToken")
        # The session with the admin service, while it gave this client a Redis user.
        self._session: Session | None = None
        redis_url, renew_after = self._open_session(authentication, connection_timeout_ms)
        self.redis_url = redis_url  # with the session's credentials, when it has some
        self.redis = self._connect(redis_url, connection_timeout_ms)
        # The receive path reads entries with XRANGE and parses them itself: the same
        # connections, without redis-py's per-entry conversion into dicts.
        self.raw_redis = raw_client(self.redis)
        self.cluster = is_cluster(self.redis)
        self.scripts: dict[str, Script] = self._register_scripts()
        self.host = client_host(self.redis)
        self.heartbeat_interval = heartbeat_interval_seconds or self._default_heartbeat()
        # OpenTelemetry spans of sends and receives (sluice.tracing); None: off, no cost.
        self.tracing = Tracing(tracer_provider) if tracer_provider else None
        self.ticker = Ticker()
        self._session_lost = False  # renewal refused: a new session is asked for each second
        self._renewal: int | None = None
        self._renew_interval = renew_after
        if renew_after:
            self._renewal = self.ticker.every(renew_after, self._renew_session)
            self.ticker.every(1.0, self._retry_lost_session)
        self._closed = False
        self._protocol_checked = False
        self._lock = threading.Lock()
        self._producers: list[Producer] = []
        self._consumers: list[Consumer] = []
        self.ticker.every(self.heartbeat_interval, self._beat_consumers)

    def _open_session(
        self, authentication: AuthenticationToken | None, connection_timeout_ms: int
    ) -> tuple[str, float | None]:
        """The Redis URL to connect to and when to renew its credentials: from the admin
        service when ``service_url`` is one (keeping the session while it gave this client a
        Redis user), else ``service_url`` itself."""
        service_url = self.service_url
        if service_url.startswith(("http://", "https://")):
            session = Session(service_url, authentication, connection_timeout_ms / 1000)
            credentials = session.open()
            redis_url = credentials.service_url
            if credentials.username and credentials.password:
                self._session = session
                url = with_credentials(redis_url, credentials.username, credentials.password)
                return url, credentials.renew_after
            session.close()  # authentication is off: the plain Redis URL is all there is
            return redis_url, None
        if authentication is not None:
            raise InvalidConfiguration(
                "authentication needs the admin service's URL (http://host:8080), which "
                "trades the token for Redis credentials; a Redis URL carries its own"
            )
        return service_url, None

    def _connect(self, redis_url: str, connection_timeout_ms: int) -> redis.Redis:
        """A connected Redis client (``ConnectError`` when it cannot be reached or refuses
        the credentials; the session, if any, is closed then)."""
        try:
            client = connect(
                redis_url,
                socket_connect_timeout=connection_timeout_ms / 1000,
                health_check_interval=30,
            )
            client.ping()
        except RedisAuthenticationError as exc:
            self._close_session()
            raise ConnectError(
                f"authentication failed at {redact_url(redis_url)}: {exc} "
                "(check the user and password in the service URL)"
            ) from None
        except RedisConnectionError as exc:
            self._close_session()
            raise ConnectError(f"cannot reach {redact_url(redis_url)}: {exc}") from None
        return client

    def _register_scripts(self) -> dict[str, Script]:
        """Every data-plane script by name.  A session user may call the scripts but not load
        them: the admin service does."""
        if self._session is not None:
            session = self._session

            def renew() -> None:
                session.renew()

            return {
                name: SessionScript(self.redis, spec.source, renew)
                for name, spec in SCRIPTS.items()
            }
        return {name: self.redis.register_script(spec.source) for name, spec in SCRIPTS.items()}

    def _default_heartbeat(self) -> float:
        """A fifth of the consumer timeout the workers publish (at least 1 s, at most 30 s):
        a registration survives four lost heartbeats, and idle consumers cost Redis little."""
        raw = self.redis.hget(keys.CLIENT_CONFIG, "consumerTimeoutMs")
        timeout_ms = int(raw) if raw else DEFAULT_CONSUMER_TIMEOUT_MS
        return min(max(timeout_ms / 5000, 1.0), 30.0)

    # --- producers and consumers ----------------------------------------------------------

    def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        schema: object = None,
        initial_sequence_id: int | None = None,
        send_timeout_millis: int = 30_000,
        compression_type: object = "NONE",
        max_pending_messages: int = 1000,
        max_pending_messages_across_partitions: int = 50_000,
        block_if_queue_full: bool = False,
        batching_enabled: bool = False,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = 10,
        chunking_enabled: bool = False,
        message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
        lazy_start_partitioned_producers: bool = False,
        properties: dict[str, str] | None = None,
        batching_type: object = BatchingType.Default,
        encryption_key: str | None = None,
        crypto_key_reader: object = None,
        access_mode: object = "Shared",
        message_router: Callable[[object, int], int] | None = None,
        *,
        backoff_initial_ms: int = 1000,
        backoff_multiplier: float = 1.6,
        backoff_jitter: float = 0.2,
        backoff_max_ms: int = 120_000,
        max_send_attempts: int = 3,
        clock: Clock | None = None,
        durable_ack_replicas: int = 0,
        durable_ack_timeout_ms: int = DEFAULT_DURABLE_ACK_TIMEOUT_MS,
    ) -> Producer:
        """A producer on ``topic`` (created on first use when auto-creation is allowed).

        The defaults are pulsar-client's (batching off, a pending queue of 1000 messages
        that ``send_async`` does not block on).  ``batching_type=BatchingType.KeyBased`` batches
        each key's messages apart (``sluice.batching``); another value than a ``BatchingType``
        raises ``InvalidConfiguration``.  ``backoff_*`` shape the retries of sends a
        backlog quota refuses (``producer_exception`` gives up after ``max_send_attempts``
        attempts); ``clock`` replaces time and sleep.  ``durable_ack_replicas`` (a Sluice
        extension): each send waits for that many replicas (``sluice.durable``).
        """
        self._check_open()
        refuse_non_defaults(
            "create_producer", PRODUCER_DEFAULTS, {**locals(), "schema": _bytes_schema(schema)}
        )
        kind = as_batching_type(batching_type)
        name = parse_topic(topic)
        backoff = _backoff(backoff_initial_ms, backoff_multiplier, backoff_jitter, backoff_max_ms)
        partitions = self.lookup_partitions(name, "produce")
        producer = Producer(
            self,
            name,
            partitions,
            producer_name=producer_name,
            send_timeout_ms=send_timeout_millis,
            batching=batching_enabled,
            batching_type=kind,
            batch_max_messages=batching_max_messages,
            batch_max_bytes=batching_max_allowed_size_in_bytes,
            batch_delay_ms=batching_max_publish_delay_ms,
            routing_mode=message_routing_mode,
            router=message_router,
            properties=properties or {},
            backoff=backoff,
            max_send_attempts=max_send_attempts,
            clock=clock,
            initial_sequence_id=initial_sequence_id,
            max_pending_messages=max_pending_messages,
            max_pending_messages_across_partitions=max_pending_messages_across_partitions,
            block_if_queue_full=block_if_queue_full,
            durability=Durability(durable_ack_replicas, durable_ack_timeout_ms),
        )
        with self._lock:
            self._producers.append(producer)
        return producer

    def subscribe(
        self,
        topic: str | list[str],
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        schema: object = None,
        message_listener: Callable[[Consumer, Message], None] | None = None,
        receiver_queue_size: int = 1000,
        max_total_receiver_queue_size_across_partitions: int = 50_000,
        consumer_name: str | None = None,
        unacked_messages_timeout_ms: int | None = None,
        broker_consumer_stats_cache_time_ms: int = 30_000,
        negative_ack_redelivery_delay_ms: int = 60_000,
        is_read_compacted: bool = False,
        properties: dict[str, str] | None = None,
        pattern_auto_discovery_period: int = 60,
        initial_position: InitialPosition = InitialPosition.Latest,
        crypto_key_reader: object = None,
        replicate_subscription_state_enabled: bool = False,
        max_pending_chunked_message: int = 10,
        auto_ack_oldest_chunked_message_on_queue_full: bool = False,
        start_message_id_inclusive: bool = False,
        batch_receive_policy: object = None,
        key_shared_policy: ConsumerKeySharedPolicy | None = None,
        batch_index_ack_enabled: bool = False,
        regex_subscription_mode: object = "PersistentOnly",
        dead_letter_policy: DeadLetterPolicy | None = None,
        crypto_failure_action: object = "FAIL",
    ) -> Consumer:
        """A consumer of ``subscription_name`` on one topic or a list of topics.

        ``message_listener(consumer, message)`` is called on a thread of the consumer's own
        for every message (``receive`` is then refused).  Arguments for what Sluice lacks
        (schemas, compaction, chunking, encryption, replication, batch receive, topic
        patterns, consumer properties) raise ``NotSupported`` unless left at their defaults.
        """
        self._check_open()
        if not isinstance(topic, str | list):
            raise NotSupported("subscribe: a topic pattern is not supported (a name or a list)")
        arguments = {**locals(), "schema": _bytes_schema(schema), "properties": properties or None}
        refuse_non_defaults("subscribe", SUBSCRIBE_DEFAULTS, arguments)
        if dead_letter_policy is not None and dead_letter_policy.initial_subscription_name:
            raise NotSupported(
                "subscribe: DeadLetterPolicy.initial_subscription_name is not supported "
                "(create the dead-letter topic's subscription before it is needed)"
            )
        topics = [topic] if isinstance(topic, str) else list(topic)
        _check_subscription(
            topics, subscription_name, receiver_queue_size, unacked_messages_timeout_ms
        )
        partitions = self._partitions_of(topics, subscription_name)
        per_partition = _queue_per_partition(
            receiver_queue_size, max_total_receiver_queue_size_across_partitions, len(partitions)
        )
        consumer = Consumer(
            self,
            topics,
            partitions,
            subscription_name,
            consumer_type=consumer_type,
            permits=per_partition,
            consumer_name=consumer_name,
            ack_timeout_ms=unacked_messages_timeout_ms or 0,
            nack_delay_ms=negative_ack_redelivery_delay_ms,
            dead_letter_policy=dead_letter_policy,
            initial_position=initial_position,
            key_shared_policy=key_shared_policy,
        )
        with self._lock:
            self._consumers.append(consumer)
        if message_listener is not None:
            consumer._listen(message_listener)
        return consumer

    def create_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        schema: object = None,
        reader_listener: object = None,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        subscription_role_prefix: str | None = None,
        is_read_compacted: bool = False,
        crypto_key_reader: object = None,
        start_message_id_inclusive: bool = False,
        crypto_failure_action: object = "FAIL",
    ) -> Reader:
        """A reader of ``topic`` from ``start_message_id`` (``MessageId.earliest``,
        ``MessageId.latest`` or a message's id; that message itself only with
        ``start_message_id_inclusive``).  Arguments for what Sluice lacks (schemas, a reader
        listener, compaction, encryption, a subscription role prefix) raise ``NotSupported``
        unless left at their defaults."""
        self._check_open()
        arguments = {**locals(), "schema": _bytes_schema(schema)}
        refuse_non_defaults("create_reader", READER_DEFAULTS, arguments)
        if not isinstance(start_message_id, MessageId):
            raise InvalidConfiguration(
                "start_message_id must be a MessageId (MessageId.earliest, MessageId.latest "
                "or a message's id)"
            )
        consumer = reader_consumer(self, topic, start_message_id, receiver_queue_size, reader_name)
        return Reader(self, consumer, start_message_id, start_message_id_inclusive)

    def _partitions_of(self, topics: list[str], subscription: str) -> list[TopicName]:
        """Every partition of these topics (a non-partitioned topic stands for itself), each
        topic looked up for a subscribe with ``subscription``."""
        partitions: list[TopicName] = []
        for each in topics:
            name = parse_topic(each)
            count = self.lookup_partitions(name, "consume", subscription)
            if count:
                partitions.extend(name.partition(i) for i in range(count))
            else:
                partitions.append(name)
        return partitions

    def get_topic_partitions(self, topic: str) -> list[str]:
        """Full names of a topic's partitions (the topic itself when non-partitioned)."""
        name = parse_topic(topic)
        count = self.lookup_partitions(name)
        return [name.partition(i).full for i in range(count)] if count else [name.full]

    def reload_scripts(self) -> None:
        """Load the data-plane scripts on every master that lacks them (a replica promoted by
        a Redis Cluster failover starts with none, and pipelined calls do not load them); a
        session user asks the admin service to."""
        if self._session is not None:
            self._session.renew()
            return
        present = self.redis.script_exists(*(s.sha for s in self.scripts.values()))
        for script, ok in zip(self.scripts.values(), present, strict=True):
            if not ok:
                self.redis.script_load(script.script)

    def close(self) -> None:
        """Close every producer and consumer, then the connection."""
        if self._closed:
            return
        for producer in list(self._producers):
            producer.close()
        for consumer in list(self._consumers):
            consumer.close()
        self._closed = True
        self.ticker.stop()
        self._close_session()
        self.redis.close()

    def _renew_session(self) -> None:
        session = self._session
        if session is None:
            return
        try:
            self._renew_every(session.renew())
            self._session_lost = False
        except AuthenticationError as exc:  # the token expired, or the session has ended
            self._reopen_session(session, exc)
        except SluiceException as exc:
            log.warning("data-plane session not renewed: %s", exc)

    def _reopen_session(self, session: Session, cause: SluiceException) -> None:
        """Open a new session with the token the supplier gives now (a refreshed one, after
        the old token expired and its session ended) and connect with its credentials; until
        that works, try again every second."""
        try:
            credentials = session.open()
        except SluiceException as exc:
            if not self._session_lost:
                log.warning(
                    "data-plane session lost (%s); a new one is asked for every second with "
                    "the token supplier's current token (%s)",
                    cause,
                    exc,
                )
            self._session_lost = True
            return
        if credentials.username and credentials.password:
            use_credentials(self.redis, credentials.username, credentials.password)
        self._renew_every(credentials.renew_after)
        log.info("data-plane session opened again as %s", credentials.username)
        self._session_lost = False

    def _renew_every(self, seconds: float | None) -> None:
        """Renew at the pace the admin service asks for (half the session's life left: a
        session cut short by its token's expiry is renewed before it ends)."""
        if not seconds or self._renewal is None or seconds == self._renew_interval:
            return
        self.ticker.cancel(self._renewal)
        self._renewal = self.ticker.every(seconds, self._renew_session)
        self._renew_interval = seconds

    def _retry_lost_session(self) -> None:
        if self._session_lost:
            self._renew_session()

    def _close_session(self) -> None:
        if self._session is not None:
            self._session.close()

    # --- topic metadata -------------------------------------------------------------------

    def lookup_partitions(
        self, topic: TopicName, action: str | None = None, subscription: str | None = None
    ) -> int:
        """Partition count of ``topic`` (0 = non-partitioned), creating it when allowed;
        ``action`` (``produce``, ``consume``) is what a refusal of a session user names.  A
        session user about to subscribe names its ``subscription``: the admin service checks
        it against the namespace's subscription permissions (``AuthorizationError``)."""
        if not self._protocol_checked:
            self._check_protocol()
        if subscription is not None and self._session is not None:
            return self._session.partitions(topic, action, subscription)
        base = topic.base
        raw = self.redis.hget(keys.TOPICS, base.full)
        if raw is not None:
            partitions = int(orjson.loads(raw)["partitions"])
            if topic.partition_index >= 0 and topic.partition_index >= partitions:
                raise TopicNotFound(f"Topic {topic.full} does not exist")
            return 0 if topic.partition_index >= 0 else partitions
        if self._session is not None:
            # A session user may not write the registry: the admin service creates the topic
            # when the role may use it.
            return self._session.partitions(topic, action)
        return self._auto_create(base)

    def _check_protocol(self) -> None:
        """Refuse a deployment that requires a newer data-plane protocol than this client
        speaks (``sluice.protocol.version``), once per client."""
        fields = self.redis.hmget(keys.CLIENT_CONFIG, OLDEST_FIELD, NEWEST_FIELD)
        try:
            check("this client", *cast(list[bytes | None], fields))
        except ProtocolMismatch as exc:
            raise UnsupportedVersionError(exc.reason) from None
        self._protocol_checked = True

    def _auto_create(self, topic: TopicName) -> int:
        namespaces = cast(set[bytes], self.redis.smembers(keys.NAMESPACES))
        config = cast(dict[bytes, bytes], self.redis.hgetall(keys.CLIENT_CONFIG))
        try:
            script_keys, args = auto_create_call(topic, namespaces, config)
        except NotFound as exc:
            missing = NamespaceNotFound if exc.reason.startswith("Namespace") else TopicNotFound
            raise missing(exc.reason) from None
        try:
            stored = self.scripts[TOPIC_CREATE.name](keys=script_keys, args=args)
        except ResponseError as exc:
            raise refusal(exc) or exc from None
        return int(orjson.loads(cast(bytes, stored))["partitions"])

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed("client is closed")

    def _beat_consumers(self) -> None:
        """Every consumer's heartbeat, together (``sluice.heartbeats``)."""
        with self._lock:
            consumers = list(self._consumers)
        if consumers:
            heartbeats.beat(self, consumers)

    def _forget(self, item: Producer | Consumer) -> None:
        with self._lock:
            if item in self._producers:
                self._producers.remove(item)
            if item in self._consumers:
                self._consumers.remove(item)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def client_host(connection: redis.Redis) -> str:
    """This client's host as Redis sees it (the address of its connection, without the port):
    what the subscribe rate counts consumer names per, as Pulsar counts them per client
    address.  The machine's host name when Redis does not say (an ACL without ``CLIENT``)."""
    try:
        address = str(connection.client_info().get("addr", ""))
    except RedisError:
        address = ""
    host = address.rpartition(":")[0].strip("[]")
    return host or socket.gethostname()
