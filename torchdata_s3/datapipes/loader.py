"""S3FileLoader: ``(url, stream)`` for S3 objects, downloaded ahead of the reader."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Optional

from torch.utils.data.datapipes.datapipe import IterDataPipe
from torch.utils.data.datapipes.iter.sharding import SHARDING_PRIORITIES, _ShardingIterDataPipe
from torch.utils.data.datapipes.utils.common import StreamWrapper

from ..client import S3Client, is_folder_marker
from ..config import S3Config
from ..fetch import (
    DEFAULT_MAX_INFLIGHT_BYTES,
    DEFAULT_PREFETCH,
    ObjectTarget,
    check_prefetch,
    fetch_in_order,
)
from ..options import config_from_arguments
from ..url import S3Url, parse_s3_url
from .base import S3IterDataPipe
from .lister import ListedSizes, S3FileLister
from .sharding import ShardSpec, as_datapipe, has_sharding_upstream, sources_upstream
from .wrapper import S3StreamWrapper

__all__ = ["S3FileLoader"]


class S3FileLoader(S3IterDataPipe[tuple[str, StreamWrapper]]):
    r"""Yields ``(url, stream)`` for each S3 object (functional name: ``load_files_by_s3``). A drop-in for
    torchdata's ``S3FileLoader`` (0.4-0.9), but GIL-free, streaming, and prefetching.

    ``stream`` is a seekable binary file object (:class:`~torchdata_s3.reader.S3ObjectStream`: ``read``,
    ``readinto``, ``readline``, iteration over lines, ``seek``/``tell`` anywhere; an object of at most
    ``small_object_bytes`` (1 MiB) arrives whole first and is a
    :class:`~torchdata_s3.landed.LandedObjectStream`, an ``io.BytesIO`` over the bytes it was received into)
    wrapped in torch's ``StreamWrapper``, as the original yielded its ``BytesIO``; so ``PIL.Image.open``,
    ``torch.load``, ``numpy.load``, ``zipfile``, ``tarfile`` and pyarrow take it as it is. An object up to
    ``retain_bytes`` (64 MiB) is kept whole once read; a larger one keeps its last part, and other positions
    are fetched again with ranged GETs. The object's response has arrived when it is yielded (all of it, for
    a small one): a missing or unreadable object raises then, in input order.

    Inputs ending in ``/`` (and bare buckets) are prefixes: they expand to the objects under them, in key
    order. Other inputs are objects. The size of an object listed here, or by a ``list_files_by_s3()``
    upstream (through sharding filters and shuffles; not through a map that changes the URL), is known
    before its GET: an object of one part then comes in one GET of its size, straight into the ``bytes``
    its ``read()`` returns.

    Sharding: when nothing upstream shards (no ``sharding_filter()``), this DataPipe is the sharding point
    itself, so DataLoader workers and distributed ranks each load a disjoint share of the objects instead of
    all of them; torch then refuses a second ``sharding_filter()`` downstream rather than dropping data. With
    a ``sharding_filter()`` upstream (the classic ``list_files_by_s3().sharding_filter().load_files_by_s3()``)
    it loads whatever reaches it.

    Prefetch: up to ``prefetch`` objects are requested ahead of the one being read, within
    ``max_inflight_bytes``: an object of known size (from a listing) may buffer up to ``read_window_bytes``
    of itself ahead, an object of unknown size one part. The object being read may buffer up to
    ``read_window_bytes`` ahead of the reader. So the loader holds at most ``max(max_inflight_bytes,
    read_window_bytes) + read_window_bytes`` of downloaded data, whatever the objects' sizes (one object is
    always requested ahead, even if its window alone exceeds the budget); the process keeps up to 128 MiB of
    read() results nobody holds any more, to receive into again (docs/streams.md). Objects are yielded in
    input order.
    Of ``max_inflight_bytes`` the loader expects to use what six of the endpoint's round trips (measured by
    the CRT on real requests) at ``throughput_target_gbps`` need, at least two parts: all of it against S3,
    two parts against a server next door, where read-ahead memory costs more to fault in than the latency it
    hides. Against that expectation an object of unknown size counts as large as the recent objects were, so
    many small objects are requested at once even when the budget is two parts.

    Args:
        source_datapipe: ``s3://`` URLs of objects or prefixes (an IterDataPipe, or any iterable such as a
            list, as the original accepted).
        request_timeout_ms: see :class:`S3Config` [-1: the config's, 10000].
        region: AWS region [``""``: from the config or environment].
        buffer_size: bytes buffered ahead of the reader per object, as in the original
            [None: config.read_window_bytes, 64 MiB].
        multi_part_download: download each object as parallel ranged parts [None/True]; False fetches one
            part at a time, as the original did without it.
        config: an :class:`S3Config` [None: resolved from the environment].
        prefetch: objects requested ahead of the one being read [128].
        max_inflight_bytes: budget for the objects requested ahead [512 MiB].
        **options: any :class:`S3Config` field, overriding ``config``.

    Raises (during iteration, when the affected object is reached):
        InvalidS3UrlError, S3FileNotFoundError, S3PermissionError, S3TimeoutError, S3NetworkError,
        S3IntegrityError, S3Error.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> S3FileLoader:
        # Unpickling calls __new__ with no arguments and then restores the state of the class it recorded.
        source = args[0] if args else kwargs.get("source_datapipe")
        if cls is S3FileLoader and source is not None and not has_sharding_upstream(source):
            cls = _ShardingS3FileLoader
        return super().__new__(cls)

    def __init__(
        self,
        source_datapipe: IterDataPipe[str],
        request_timeout_ms: int = -1,
        region: str = "",
        buffer_size: Optional[int] = None,
        multi_part_download: Optional[bool] = None,
        *,
        config: Optional[S3Config] = None,
        prefetch: int = DEFAULT_PREFETCH,
        max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES,
        **options: Any,
    ) -> None:
        super().__init__()
        if buffer_size is not None:
            if not isinstance(buffer_size, int) or buffer_size < 1:
                raise ValueError(f"buffer_size must be a positive number of bytes, got {buffer_size!r}")
            options.setdefault("read_window_bytes", buffer_size)
        check_prefetch(prefetch, max_inflight_bytes)
        self.source_datapipe = as_datapipe(source_datapipe)
        self.client = S3Client(
            config_from_arguments(config, region=region, request_timeout_ms=request_timeout_ms, **options)
        )
        self.multi_part_download = multi_part_download is not False
        self.prefetch = prefetch
        self.max_inflight_bytes = max_inflight_bytes
        self.shard = ShardSpec()

    def _listed_upstream(self) -> list[ListedSizes]:
        """What the listers feeding this loader keep of their listings (list_files_by_s3() upstream)."""
        return [node.remember_listed() for node in sources_upstream(self) if isinstance(node, S3FileLister)]

    def _targets(self) -> Iterator[ObjectTarget]:
        """The objects to load, prefixes expanded, restricted to this instance's shard. An object a lister
        upstream listed comes with its size and ETag, as one of a prefix listed here does."""
        position = 0
        listed = self._listed_upstream()
        for url in self.source_datapipe:
            location = parse_s3_url(url)
            if location.is_prefix:
                # The next page is asked for while this one's objects are served (from the cache, faster than
                # a round trip): only the first page's round trip is waited for.
                for key, size, etag in self.client.list_location(location, read_ahead=True):
                    if is_folder_marker(key, size):
                        continue
                    if self.shard.owns(position):
                        object_url = f"s3://{location.bucket}/{key}"
                        yield ObjectTarget(object_url, S3Url(location.bucket, key), size, etag)
                    position += 1
            else:
                if self.shard.owns(position):
                    entry = None
                    for sizes in listed:
                        entry = sizes.get(url)
                        if entry is not None:
                            break
                    if entry is None:
                        yield ObjectTarget(url, location, None)
                    else:
                        yield ObjectTarget(url, location, entry[1], entry[2])
                position += 1

    def __iter__(self) -> Iterator[tuple[str, StreamWrapper]]:
        fetched = fetch_in_order(
            self.client,
            self._targets(),
            prefetch=self.prefetch,
            max_inflight_bytes=self.max_inflight_bytes,
            multi_part_download=self.multi_part_download,
        )
        with contextlib.closing(fetched):
            for target, stream, error in fetched:
                if error is not None:
                    raise error  # in input order, when the object is reached, as the original loader did
                yield target.url, S3StreamWrapper(stream, name=target.url)

    def __len__(self) -> int:
        total = len(self.source_datapipe)  # counts each prefix as one object, as the original did
        shard = self.shard
        return total // shard.count + (1 if shard.index < total % shard.count else 0)


class _ShardingS3FileLoader(S3FileLoader, _ShardingIterDataPipe):
    """The loader as the pipeline's sharding point (chosen by S3FileLoader when nothing upstream shards)."""

    def apply_sharding(  # type: ignore[override]  # torch annotates its abstract method -> NoReturn
        self,
        num_of_instances: int,
        instance_id: int,
        sharding_group: SHARDING_PRIORITIES = SHARDING_PRIORITIES.DEFAULT,
    ) -> None:
        self.shard.apply(num_of_instances, instance_id, sharding_group)
