"""S3FileLister: URLs of the objects under S3 prefixes."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any, Optional, Union

from torch.utils.data.datapipes.datapipe import IterDataPipe
from torch.utils.data.datapipes.utils.common import match_masks

from ..client import S3Client, is_folder_marker
from ..config import S3Config
from ..options import config_from_arguments
from ..url import parse_s3_url
from .base import S3IterDataPipe
from .sharding import as_datapipe

__all__ = ["ListedSizes", "S3FileLister"]

# URLs whose listing entries a lister keeps for a loader downstream: the loader asks for each as it requests
# it, at most its prefetch (128) plus a page or two behind the lister (which reads one page ahead).
KEPT_LISTED_URLS = 16384


class ListedSizes:
    """The listing entries (key, size, ETag) of the URLs a lister yielded last, for a loader downstream.

    A loader that lists a prefix itself knows each object's size, and fetches an object of one part with one
    GET of its size straight into the bytes read() returns; a loader fed by ``list_files_by_s3()`` gets plain
    URL strings. It finds the lister upstream and asks it to keep this (bounded: the oldest pages go first).
    A URL changed on the way (a map in between) is simply not found.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Any, ...]] = {}
        self._pages: deque[list[str]] = deque()

    def add(self, urls: list[str], entries: list[tuple[Any, ...]]) -> None:
        self._entries.update(zip(urls, entries))
        self._pages.append(urls)
        while len(self._entries) > KEPT_LISTED_URLS and len(self._pages) > 1:
            for url in self._pages.popleft():
                self._entries.pop(url, None)

    def get(self, url: str) -> Optional[tuple[Any, ...]]:
        return self._entries.get(url)


class S3FileLister(S3IterDataPipe[str]):
    r"""Yields ``s3://bucket/key`` for every object under each input prefix (functional name:
    ``list_files_by_s3``). A drop-in for torchdata's ``S3FileLister`` (0.4-0.9).

    Each input is a prefix: ``s3://bucket`` or ``s3://bucket/`` lists the whole bucket, ``s3://bucket/dir/``
    one folder (recursively), ``s3://bucket/da`` every key starting with ``da``. Objects come in S3's
    lexicographic key order, input by input. Zero-byte "folder marker" keys ending in ``/`` are skipped.

    Args:
        source_datapipe: URLs (prefixes) to list.
        length: nominal length reported by ``len()`` [-1: ``len()`` raises TypeError].
        request_timeout_ms: see :class:`S3Config` [-1: the config's, 10000].
        region: AWS region [``""``: from the config or environment].
        masks: fnmatch pattern(s) matched against the full URL; only matching URLs are yielded
            [``""``: all].
        config: an :class:`S3Config` [None: resolved from the environment].
        page_size: keys per ListObjectsV2 request [None: the server's maximum, 1000 on S3].
        **options: any :class:`S3Config` field, overriding ``config``.

    Raises (during iteration):
        InvalidS3UrlError, S3FileNotFoundError (no such bucket), S3PermissionError, S3NetworkError.
    """

    def __init__(
        self,
        source_datapipe: IterDataPipe[str],
        length: int = -1,
        request_timeout_ms: int = -1,
        region: str = "",
        masks: Union[str, list[str]] = "",
        *,
        config: Optional[S3Config] = None,
        page_size: Optional[int] = None,
        **options: Any,
    ) -> None:
        super().__init__()
        self.source_datapipe = as_datapipe(source_datapipe)
        self.length = length
        self.masks = masks
        self.page_size = page_size
        self.client = S3Client(
            config_from_arguments(config, region=region, request_timeout_ms=request_timeout_ms, **options)
        )
        self._listed: Optional[ListedSizes] = None

    def remember_listed(self) -> ListedSizes:
        """Keeps the listing entries of the URLs yielded from now on (see ListedSizes); a loader downstream
        calls this when it starts."""
        if self._listed is None:
            self._listed = ListedSizes()
        return self._listed

    def __iter__(self) -> Iterator[str]:
        for prefix_url in self.source_datapipe:
            location = parse_s3_url(prefix_url)
            head = f"s3://{location.bucket}/"
            masks = self.masks
            for page in self.client.list_pages(location, page_size=self.page_size, read_ahead=True):
                # A page at a time: a comprehension per page, not a loop iteration per key, is most of what
                # listing costs here (10^6 keys take a few seconds in all).
                listed = self._listed
                if listed is None:
                    urls = [head + key for key, size, _etag in page if not is_folder_marker(key, size)]
                else:
                    page = [entry for entry in page if not is_folder_marker(entry[0], entry[1])]
                    urls = [head + entry[0] for entry in page]
                    listed.add(urls, page)
                if masks:
                    urls = [url for url in urls if match_masks(url, masks)]
                yield from urls

    def __len__(self) -> int:
        if self.length == -1:
            raise TypeError(f"{type(self).__name__} instance doesn't have valid length")
        return self.length
