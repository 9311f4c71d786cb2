"""Connected consumers held in processes of their own, for the benchmarks of idle load.

A benchmark that keeps thousands of consumers connected must not run their heartbeats (one
Redis call per consumer per heartbeat interval, on each client's background thread) in the
process that measures, where they would share its interpreter lock with the sampler and the
latency probes.  ``ConsumerPool`` starts a few ``spawn`` processes; each subscribes the
Shared consumers it is sent (one client per ``per_client`` consumers, so no single heartbeat
thread has too many to serve) and keeps them connected, never receiving, until closed.

    with ConsumerPool(redis_url, processes=2) as pool:
        pool.add([("persistent://t/ns/topic", "sub"), ...])
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ConsumerOptions:
    """How the consumers subscribe and heartbeat."""

    heartbeat_seconds: float | None = None  # the client's default
    receiver_queue_size: int = 1000
    per_client: int = 250


def hold(redis_url: str, options: dict, commands, answers) -> None:
    """Pool process: subscribe a Shared consumer for each (topic, subscription) it is sent,
    answer how many it holds (or the error, as text); close everything on ``None``."""
    import sluice

    settings = ConsumerOptions(**options)
    clients: list[sluice.Client] = []
    consumers: list[sluice.Consumer] = []
    while True:
        specs = commands.get()
        if specs is None:
            break
        try:
            for topic, subscription in specs:
                if not clients or len(consumers) >= settings.per_client * len(clients):
                    clients.append(
                        sluice.Client(
                            redis_url, heartbeat_interval_seconds=settings.heartbeat_seconds
                        )
                    )
                consumers.append(
                    clients[-1].subscribe(
                        topic,
                        subscription,
                        consumer_type=sluice.ConsumerType.Shared,
                        receiver_queue_size=settings.receiver_queue_size,
                    )
                )
            answers.put(len(consumers))
        except Exception as exc:  # handed to the parent, which raises it
            answers.put(f"{type(exc).__name__}: {exc}")
    for consumer in consumers:
        consumer.close()
    for client in clients:
        client.close()
    answers.put(len(consumers))


class ConsumerPool:
    """Processes holding connected consumers that do not receive."""

    def __init__(
        self, redis_url: str, processes: int = 1, options: ConsumerOptions | None = None
    ) -> None:
        context = mp.get_context("spawn")
        settings = asdict(options or ConsumerOptions())
        self.workers = []
        for _ in range(max(1, processes)):
            commands, answers = context.Queue(), context.Queue()
            process = context.Process(
                target=hold, args=(redis_url, settings, commands, answers), daemon=True
            )
            process.start()
            self.workers.append((process, commands, answers))
        self.counts = [0] * len(self.workers)

    @property
    def count(self) -> int:
        """Consumers connected now."""
        return sum(self.counts)

    def add(self, specs: list[tuple[str, str]], timeout: float = 3600.0) -> int:
        """Connect a consumer to each (topic, subscription), the processes sharing the work;
        the number connected in all."""
        busy = []
        for index, (_process, commands, _answers) in enumerate(self.workers):
            share = specs[index :: len(self.workers)]
            if share:
                commands.put(share)
                busy.append(index)
        errors = []
        for index in busy:
            answer = self.workers[index][2].get(timeout=timeout)
            if isinstance(answer, str):
                errors.append(answer)
            else:
                self.counts[index] = answer
        if errors:
            raise RuntimeError(f"consumers could not subscribe: {errors[0]}")
        return self.count

    def close(self) -> None:
        """Close every consumer and end the processes."""
        for _process, commands, _answers in self.workers:
            commands.put(None)
        for process, _commands, answers in self.workers:
            with contextlib.suppress(queue.Empty):  # one that cannot close is killed below
                answers.get(timeout=120)
            process.join(30)
            if process.is_alive():
                process.kill()

    def __enter__(self) -> ConsumerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
