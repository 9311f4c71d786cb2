"""A consumer's connection breaks between taking a notice off its receiver queue and reading
the entries it names: the entries still arrive.

The worker hands runs of large new entries out as notices ("these ids are yours") in the
consumer's queue (small ones go whole, in the element itself); the consumer pops a notice,
then reads the entries with ``XRANGE``.  A pop is final: if the
read fails (the master dies, the connection resets) and the consumer forgot the notice, its
entries would stay pending to a live consumer and never be delivered.  The client here reaches
Redis through a forwarder that closes the connection the moment ``XRANGE`` goes out, once; the
message must still be received, once.
"""

from __future__ import annotations

import pytest

import sluice
from tests.faults.test_worker_cut_off import redis_port
from tests.tcp_proxy import TcpProxy
from tests.workers.conftest import wait_until
from tests.workers.test_client import TOPIC, make_topic

pytestmark = pytest.mark.faults

LARGE = b"x" * 600_000  # more payload than dispatch.lua hands over whole (PACKET_BYTES)


def test_a_read_broken_after_the_pop_still_delivers(http, namespace, worker, settings):
    make_topic(http)
    proxy = TcpProxy(redis_port(settings.redis_url)).start()
    try:
        with (
            sluice.Client(f"redis://127.0.0.1:{proxy.port}/0") as client,
            sluice.Client(settings.redis_url) as direct,
        ):
            consumer = client.subscribe(TOPIC, "sub")
            proxy.drop_on = b"XRANGE"
            direct.create_producer(TOPIC).send(LARGE)  # goes as a notice
            with pytest.raises(sluice.Timeout):
                consumer.receive(timeout_millis=300)  # popped the notice; the read broke
            wait_until(lambda: proxy.dropped >= 1, timeout=10)
            proxy.drop_on = None
            message = consumer.receive(timeout_millis=5000)
            assert message.data() == LARGE
            assert message.redelivery_count() == 0
            consumer.acknowledge(message)
            with pytest.raises(sluice.Timeout):
                consumer.receive(timeout_millis=500)
    finally:
        proxy.cut()
