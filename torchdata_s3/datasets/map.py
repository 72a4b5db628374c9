"""S3MapDataset: random access by index to the objects under prefixes (or given URLs)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Optional, Union

from torch.utils.data import Dataset

from .objects import DatasetObjects, Transform

__all__ = ["S3MapDataset"]


class S3MapDataset(Dataset):
    r"""``ds[i]`` is ``transform(stream)`` of the i-th object in key order; ``len(ds)`` the number of objects.

    The objects are listed once, when the dataset is built (on one rank, shared with the others), and the
    dataset pickles into spawned DataLoader workers with its list: nothing is listed again. Shuffling is
    the sampler's (``DataLoader(ds, shuffle=True)``, ``DistributedSampler``), and so is resuming
    (``StatefulDataLoader`` saves the sampler's position).

    A batch of indices (``DataLoader`` calls ``__getitems__`` with a batch's indices) is fetched with
    concurrent GETs, ``prefetch`` at a time within ``max_inflight_bytes``, so a shuffled batch costs about one
    round trip rather than one per object. ``stream`` is the seekable
    :class:`~torchdata_s3.reader.S3ObjectStream` (with ``url``, ``bucket``, ``key``), or for an object of at
    most ``small_object_bytes`` (1 MiB), which arrives whole first, a
    :class:`~torchdata_s3.landed.LandedObjectStream` (an ``io.BytesIO`` with the same attributes).

    Raises (when built): S3FileNotFoundError if no object is found (an empty prefix), InvalidS3UrlError,
    S3PermissionError, S3NetworkError. Reads raise the object's typed error, naming its URL.
    """

    def __init__(self, objects: DatasetObjects) -> None:
        super().__init__()
        if not len(objects):
            raise objects.empty_error("S3MapDataset")
        self._objects = objects

    @classmethod
    def from_prefix(
        cls, url_or_urls: Union[str, Iterable[str]], *, transform: Optional[Transform] = None, **options: Any
    ) -> S3MapDataset:
        """Every object under the prefix (or prefixes), listed now.

        Args:
            url_or_urls: one ``s3://`` prefix or several; their objects follow one another in the given order.
            transform: applied to each object's stream [None: the stream itself].
            **options: :class:`~torchdata_s3.S3Config` fields, ``config=``, and the loader's ``prefetch``
                [128] and ``max_inflight_bytes`` [512 MiB], which bound a batch's concurrent GETs.
        """
        return cls(DatasetObjects(url_or_urls, from_prefix=True, transform=transform, **options))

    @classmethod
    def from_objects(
        cls, urls: Union[str, Iterable[str]], *, transform: Optional[Transform] = None, **options: Any
    ) -> S3MapDataset:
        """The given ``s3://bucket/key`` objects, in the given order; arguments as for :meth:`from_prefix`."""
        return cls(DatasetObjects(urls, from_prefix=False, transform=transform, **options))

    @property
    def urls(self) -> list[str]:
        """The objects' URLs, index by index."""
        return self._objects.urls

    def __len__(self) -> int:
        return len(self._objects)

    def _index(self, index: int) -> int:
        count = len(self._objects)
        if not isinstance(index, int):
            index = int(index)  # numpy and torch integers
        if not -count <= index < count:
            raise IndexError(f"index {index} is out of range for S3MapDataset of {count} objects")
        return index % count

    def __getitem__(self, index: int) -> Any:
        return next(iter(self._objects.read([self._index(index)])))

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """The items of a batch of indices, fetched concurrently, in the order given."""
        return list(self._objects.read([self._index(index) for index in indices]))
