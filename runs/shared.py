"""One producer per key in a process, its latest value read by every subscriber: what lets
every viewer of one run in one process share one follower (runs.following.follow) and
one reader of the page's state (web.live), so that their work does not grow with the
number of viewers.

A subscriber sees the latest value each time it changes (values published while it was
busy are skipped: each value is the whole state), then the end, or the error the producer
ended with. The producer starts with the first subscriber and is cancelled when the last
one leaves; a later subscriber starts a fresh one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class _Feed(Generic[T]):
    def __init__(self) -> None:
        self.value: T | None = None
        self.version = 0
        self.done = False
        self.error: BaseException | None = None
        self.subscribers = 0
        self.changed = asyncio.Condition()
        self.task: asyncio.Task[None] | None = None

    async def run(self, produce: AsyncIterator[T]) -> None:
        try:
            async for value in produce:
                async with self.changed:
                    self.value, self.version = value, self.version + 1
                    self.changed.notify_all()
        except Exception as error:
            self.error = error
        finally:
            async with self.changed:
                self.done = True
                self.changed.notify_all()


class Shared(Generic[T]):
    """The producers of one kind of value, by key (a run's id, say)."""

    def __init__(self) -> None:
        self._feeds: dict[Hashable, _Feed[T]] = {}

    def producers(self) -> int:
        """How many producers run now (one per key with subscribers)."""
        return len(self._feeds)

    async def subscribe(
        self, key: Hashable, produce: Callable[[], AsyncIterator[T]]
    ) -> AsyncGenerator[T, None]:
        """The values of the producer for `key` (started with `produce()` if none runs), the
        latest first, until it ends; the producer's error, if it failed. Close it (aclosing)
        to leave at once."""
        feed = self._feeds.get(key)
        if feed is None or feed.done:
            feed = self._feeds[key] = _Feed()
            feed.task = asyncio.get_running_loop().create_task(feed.run(produce()))
        feed.subscribers += 1
        seen = [0]  # the version last read
        try:
            while True:
                async with feed.changed:
                    await feed.changed.wait_for(lambda: feed.version > seen[0] or feed.done)
                    version, value, done = feed.version, feed.value, feed.done
                if version > seen[0]:
                    seen[0] = version
                    yield value  # type: ignore[misc]  # set with every version
                    continue
                if done:
                    if feed.error is not None:
                        raise feed.error
                    return
        finally:
            feed.subscribers -= 1
            if feed.subscribers == 0:
                if self._feeds.get(key) is feed:
                    del self._feeds[key]
                if feed.task is not None:
                    feed.task.cancel()
