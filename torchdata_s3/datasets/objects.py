"""A dataset's objects: listed once where the dataset is built, held compactly, read through the engine.

Both datasets and the ``torchdata.nodes`` source hold a :class:`DatasetObjects`. It is what pickles into
DataLoader workers (keys, sizes and ETags in flat lists; no listing again), what identifies the dataset in a
saved state (its inputs and a digest of its listing, never the keys themselves), and what turns positions
into items: ``transform(stream)`` of each object, fetched in order with the loader's prefetch and cache.
"""

from __future__ import annotations

import hashlib
import warnings
from array import array
from collections.abc import Generator, Iterable, Iterator, Sequence
from typing import Any, Callable, Optional, Union

from ..client import S3Client, is_folder_marker
from ..config import S3Config
from ..distributed import computed_on_one_rank
from ..errors import S3FileNotFoundError
from ..fetch import (
    DEFAULT_MAX_INFLIGHT_BYTES,
    DEFAULT_PREFETCH,
    FetchedStream,
    ObjectTarget,
    check_prefetch,
    fetch_in_order,
)
from ..options import config_from_arguments
from ..url import S3Url, parse_s3_url

__all__ = ["DatasetObjects", "MissingObjectWarning", "Transform", "identity_transform"]

Transform = Callable[[FetchedStream], Any]
# Inputs named in full in a state (a few prefixes); more are represented by their digest alone.
INPUTS_NAMED = 8


class MissingObjectWarning(UserWarning):
    """An object listed when the dataset was built is gone, and ``skip_missing=True`` skipped it."""


def identity_transform(stream: FetchedStream) -> FetchedStream:
    """The default transform: the seekable stream itself."""
    return stream


def _digest(lines: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8", "surrogatepass"))
        digest.update(b"\n")
    return digest.hexdigest()


class DatasetObjects:
    """The objects of a dataset, in key order, and the settings they are read with.

    Args:
        inputs: prefixes (``from_prefix``) or object URLs (``from_objects``).
        from_prefix: whether ``inputs`` are prefixes, listed now (on one rank, shared with the others).
        transform: applied to each object's stream [None: the stream itself].
        skip_missing: skip (with a :class:`MissingObjectWarning`) an object deleted since it was listed,
            instead of raising its S3FileNotFoundError.
        config, prefetch, max_inflight_bytes, options: as for :class:`~torchdata_s3.S3FileLoader`.
    """

    def __init__(
        self,
        inputs: Union[str, Iterable[str]],
        *,
        from_prefix: bool,
        transform: Optional[Transform] = None,
        skip_missing: bool = False,
        config: Optional[S3Config] = None,
        prefetch: int = DEFAULT_PREFETCH,
        max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES,
        **options: Any,
    ) -> None:
        self.inputs = [inputs] if isinstance(inputs, str) else list(inputs)
        if any(not isinstance(url, str) for url in self.inputs):
            raise TypeError(f"URLs must be strings, got {self.inputs!r}")
        check_prefetch(prefetch, max_inflight_bytes)
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable, got {transform!r}")
        self.from_prefix = from_prefix
        self.transform = transform or identity_transform
        self.skip_missing = skip_missing
        self.prefetch = prefetch
        self.max_inflight_bytes = max_inflight_bytes
        self.client = S3Client(config_from_arguments(config, **options))
        # Flat columns: a million objects cost tens of MB, and pickle into each worker quickly.
        self._buckets: list[tuple[int, str]] = []  # (first index, bucket) of each run of one bucket
        self._keys: list[str] = []
        self._sizes = array("q")  # -1: unknown (from_objects)
        self._etags: list[str] = []
        if from_prefix:
            columns = computed_on_one_rank(self._list, what="building a dataset from_prefix")
        else:
            columns = self._objects()
        self._buckets, self._keys, self._sizes, self._etags = columns
        self.listing_digest = _digest(self.urls_iter())

    # -- the objects --------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._keys)

    def urls_iter(self) -> Iterator[str]:
        runs = [*self._buckets, (len(self._keys), "")]
        for (first, bucket), (end, _next) in zip(runs, runs[1:]):
            for index in range(first, end):
                yield f"s3://{bucket}/{self._keys[index]}"

    @property
    def urls(self) -> list[str]:
        """Every object's ``s3://`` URL, in the dataset's (key) order."""
        return list(self.urls_iter())

    def bucket_of(self, index: int) -> str:
        low, high = 0, len(self._buckets) - 1
        while low < high:  # the last run starting at or before index
            middle = (low + high + 1) // 2
            if self._buckets[middle][0] <= index:
                low = middle
            else:
                high = middle - 1
        return self._buckets[low][1]

    def target(self, index: int) -> ObjectTarget:
        bucket, key, size = self.bucket_of(index), self._keys[index], self._sizes[index]
        return ObjectTarget(
            f"s3://{bucket}/{key}", S3Url(bucket, key), None if size < 0 else size, self._etags[index]
        )

    def _list(self) -> tuple[list[tuple[int, str]], list[str], array, list[str]]:
        buckets: list[tuple[int, str]] = []
        keys: list[str] = []
        sizes = array("q")
        etags: list[str] = []
        for prefix in self.inputs:
            location = parse_s3_url(prefix)
            first = len(keys)
            for key, size, etag in self.client.list_location(location, read_ahead=True):
                if not is_folder_marker(key, size):
                    keys.append(key)
                    sizes.append(size)
                    etags.append(etag)
            if len(keys) > first and not (buckets and buckets[-1][1] == location.bucket):
                buckets.append((first, location.bucket))
        return buckets, keys, sizes, etags

    def _objects(self) -> tuple[list[tuple[int, str]], list[str], array, list[str]]:
        buckets: list[tuple[int, str]] = []
        keys: list[str] = []
        for url in self.inputs:
            location = parse_s3_url(url)
            if location.is_prefix:
                raise IsADirectoryError(
                    f"{url} names a prefix, not an object: from_objects takes object URLs; use from_prefix "
                    "to read every object under a prefix"
                )
            if not (buckets and buckets[-1][1] == location.bucket):
                buckets.append((len(keys), location.bucket))
            keys.append(location.key)
        return buckets, keys, array("q", [-1]) * len(keys), [""] * len(keys)

    def warn_if_empty(self, door: str) -> None:
        """The iterable doors' answer to an empty listing: a warning, then empty epochs."""
        if not len(self):
            warnings.warn(
                f"{door}: no objects under {', '.join(self.inputs)}; every epoch is empty",
                UserWarning,
                stacklevel=4,
            )

    def empty_error(self, dataset: str) -> S3FileNotFoundError:
        where = ", ".join(self.inputs) or "(no URLs)"
        return S3FileNotFoundError(
            f"{dataset}: no objects under {where}. Check the prefix (S3 prefixes match keys from their "
            "start: s3://bucket/dir/ lists dir/*), and that the bucket holds data.",
            url=self.inputs[0] if self.inputs else "",
            operation="ListObjectsV2" if self.from_prefix else "",
        )

    # -- identity in a saved state ------------------------------------------------------------------------

    def identity(self, *, shuffle: bool, seed: int) -> dict[str, Any]:
        """What a state must have been saved from to apply here (JSON-safe; never the key list)."""
        return {
            "kind": "prefix" if self.from_prefix else "objects",
            "inputs": self.inputs if len(self.inputs) <= INPUTS_NAMED else None,
            "inputs_sha256": _digest(self.inputs),
            "objects": len(self),
            "listing_sha256": self.listing_digest,
            "shuffle": shuffle,
            "seed": seed,
        }

    # -- reading ------------------------------------------------------------------------------------------

    def read(
        self, indices: Sequence[int], on_passed: Callable[[], None] = lambda: None
    ) -> Generator[Any, None, None]:
        """``transform(stream)`` of each object in ``indices``, in order, fetched ahead.

        ``on_passed`` is called once per index as it is passed (yielded or skipped), before its item is
        yielded, so that a state taken while the item is in the consumer's hands counts it.
        """
        targets = (self.target(index) for index in indices)
        fetched = fetch_in_order(
            self.client, targets, prefetch=self.prefetch, max_inflight_bytes=self.max_inflight_bytes
        )
        try:
            for target, stream, error in fetched:
                on_passed()
                if error is not None:
                    if self.skip_missing and isinstance(error, S3FileNotFoundError):
                        warnings.warn(
                            f"skipped {target.url}: it was listed but no longer exists ({error})",
                            MissingObjectWarning,
                            stacklevel=2,
                        )
                        continue
                    raise error
                assert stream is not None  # a Fetched has a stream exactly when it has no error
                yield self.transform(stream)
        finally:
            fetched.close()
