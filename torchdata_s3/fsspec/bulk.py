"""Many independent requests at once, for fsspec's calls that loop over paths one by one (get, put, pipe, rm).

fsspec's ``AbstractFileSystem.get`` and ``put`` work out every (source, destination) pair and then call
``get_file``/``put_file`` for each in turn. Rather than derive those pairs a second time, the file system runs
fsspec's own loop inside :meth:`Bulk.concurrently`: each per-file call made on that thread is then queued to a
pool instead of run at once, and the block returns when every call has finished, raising the first failure (in
the order the calls were made). Each call is native and releases the GIL, so the requests really overlap.

Progress: fsspec's loop counts each file on a caller's callback as the file starts, which for queued calls
is all of them at once. :class:`CountedWhenDone` stands in for that callback inside the loop, and the batch
counts each call on the caller's thread when it has succeeded.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any, Callable, Optional

from fsspec.callbacks import Callback

# Per-file calls in flight at once. Each is one request for a small file, or parallel parts of a large one
# (the native client bounds its connections and memory across all of them).
BULK_REQUESTS = 16


class CountedWhenDone(Callback):
    """A caller's callback as fsspec's per-file loop sees it: the total and the per-file callbacks pass on to
    it; the loop's own count (as each file starts) does not: ``Bulk.concurrently(progress=...)`` counts."""

    def __init__(self, callback: Callback) -> None:
        super().__init__()
        self._callback = callback

    def set_size(self, size: int) -> None:
        self._callback.set_size(size)

    def relative_update(self, inc: int = 1) -> None:
        pass

    def branched(self, path_1: str, path_2: str, **kwargs: Any) -> Any:
        return self._callback.branched(path_1, path_2, **kwargs)


class Bulk:
    """Per-thread batches of per-file calls (a file system is shared between threads)."""

    def __init__(self) -> None:
        self._local = threading.local()

    @contextlib.contextmanager
    def concurrently(self, progress: Optional[Callback] = None) -> Iterator[None]:
        """Within the block, :meth:`run` on this thread queues its call; the block's end waits for all,
        counting each call that succeeded on ``progress`` as it finishes."""
        if getattr(self._local, "pool", None) is not None:
            yield  # nested (pipe inside put, say): the outer batch waits for everything
            return
        futures: list[Future] = []
        with ThreadPoolExecutor(BULK_REQUESTS, thread_name_prefix="torchdata-s3-fsspec") as pool:
            self._local.pool, self._local.futures = pool, futures
            try:
                yield
            finally:
                self._local.pool = self._local.futures = None
            if progress is not None:
                for future in as_completed(futures):
                    if future.exception() is None:
                        progress.relative_update(1)
        # Every call has finished (the pool's exit waits): report the first failure.
        for future in futures:
            future.result()

    def run(self, call: Callable[..., Any], *args: Any) -> Optional[Any]:
        """``call(*args)`` now, or queued (returning None) inside :meth:`concurrently` on this thread."""
        pool = getattr(self._local, "pool", None)
        if pool is None:
            return call(*args)
        self._local.futures.append(pool.submit(call, *args))
        return None
