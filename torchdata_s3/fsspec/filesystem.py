"""``S3FileSystem``: an fsspec file system whose every request goes through torchdata_s3's native core.

Paths are ``bucket/key`` (with or without ``s3crt://``, ``s3://`` or ``s3a://`` in front). S3 has no
directories: as in s3fs, a "directory" is a prefix that some key continues with ``/``; ``mkdir`` and ``rmdir``
change nothing, and a directory exists while a key is under it.

Nothing is cached between calls: every ``ls``, ``info`` and ``find`` asks S3, so a listing never shows a
deleted object or misses a new one, and a read never trusts a size seen earlier.
"""

from __future__ import annotations

import datetime
import email.utils
import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, Union

from fsspec.spec import AbstractFileSystem

from ..client import ObjectSummary, S3Client, is_folder_marker
from ..config import S3Config
from ..errors import S3FileNotFoundError
from ..url import parse_s3_url
from .options import config_from_options, refuse_unknown
from .ranges import fetch_spans, merge_ranges

PROTOCOLS = ("s3crt", "s3", "s3a")
# cat_ranges reads ranges of one object closer than this as one GET: a request costs a round trip (tens of
# ms on S3), while reading 1 MiB more costs about 10 ms at one connection's ~100 MB/s.
MERGE_GAP_BYTES = 1024 * 1024
# rm's DeleteObject requests in flight (each a native call that releases the GIL; S3 has no batch here yet).
DELETE_THREADS = 16


class S3FileSystem(AbstractFileSystem):
    """An fsspec file system over torchdata_s3's native S3 core (``s3crt://bucket/key``).

    Takes s3fs's common options, so ``storage_options`` written for s3fs keep working:

    - ``anon``: unsigned requests (public buckets).
    - ``key``, ``secret``, ``token``: static credentials (else the AWS default chain: environment, profile,
      web identity, container, instance metadata).
    - ``endpoint_url`` or ``client_kwargs={"endpoint_url": ..., "region_name": ..., "verify": ...}``: an
      S3-compatible endpoint, the region, TLS verification (a CA bundle's path, or False).
    - ``default_block_size``: accepted for s3fs's sake; reads fetch what they need through the native reader.
    - ``config``: a :class:`~torchdata_s3.S3Config` for everything else (the options above override it).

    Thread-safe and fork-safe: a file system made in a parent process works in forked DataLoader workers
    (each process makes its own native client).
    """

    protocol = PROTOCOLS
    root_marker = ""

    def __init__(
        self,
        anon: bool = False,
        key: Optional[str] = None,
        secret: Optional[str] = None,
        token: Optional[str] = None,
        endpoint_url: Optional[str] = None,
        client_kwargs: Optional[dict[str, Any]] = None,
        requester_pays: bool = False,
        default_block_size: Optional[int] = None,
        config: Optional[S3Config] = None,
        **storage_options: Any,
    ) -> None:
        refuse_unknown(storage_options)
        super().__init__(**storage_options)
        self.config = config_from_options(
            config=config,
            anon=anon,
            key=key,
            secret=secret,
            token=token,
            endpoint_url=endpoint_url,
            client_kwargs=client_kwargs,
            requester_pays=requester_pays,
        )
        self.default_block_size = default_block_size
        self.client = S3Client(self.config)

    # --- paths -------------------------------------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Union[str, list[str]]) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        for protocol in PROTOCOLS:
            if path.startswith(protocol + "://"):
                path = path[len(protocol) + 3 :]
                break
        return path.rstrip("/")

    def unstrip_protocol(self, name: str) -> str:
        return f"s3crt://{self._strip_protocol(name)}"

    @staticmethod
    def _url(path: str) -> str:
        return f"s3://{path}"

    @staticmethod
    def _split(path: str) -> tuple[str, str]:
        bucket, _, key = path.partition("/")
        return bucket, key

    # --- listing and information -------------------------------------------------------------------------

    @staticmethod
    def _file_entry(
        bucket: str,
        key: str,
        size: int,
        etag: str,
        last_modified: Optional[datetime.datetime],
        storage_class: str,
    ) -> dict[str, Any]:
        """s3fs's keys for a file (``LastModified`` an aware datetime, as botocore gives it)."""
        name = f"{bucket}/{key}"
        return {
            "name": name,
            "Key": name,
            "size": size,
            "type": "file",
            "ETag": etag,
            "LastModified": last_modified,
            "StorageClass": storage_class or "STANDARD",  # S3 omits it for STANDARD in HeadObject
        }

    def _listed_file(self, bucket: str, entry: ObjectSummary) -> dict[str, Any]:
        return self._file_entry(
            bucket, entry.key, entry.size, entry.etag, _iso_time(entry.last_modified), entry.storage_class
        )

    @staticmethod
    def _directory_entry(name: str) -> dict[str, Any]:
        return {"name": name, "size": 0, "type": "directory", "StorageClass": "DIRECTORY"}

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        if not path:
            raise NotImplementedError("listing every bucket (ListBuckets) is not supported: name a bucket")
        bucket, key = self._split(path)
        objects, prefixes = self.client.list_directory(self._url(path))
        level = f"{key}/" if key else ""
        entries = [
            self._listed_file(bucket, o)
            for o in objects
            if not (o.key == level or is_folder_marker(o.key, o.size))
        ]
        entries += [self._directory_entry(f"{bucket}/{prefix.rstrip('/')}") for prefix in prefixes]
        if not entries and not any(o.key == level for o in objects):
            # Not a directory: a file lists as itself; anything else does not exist.
            entries = [self.info(path)]
        entries.sort(key=lambda entry: entry["name"])
        return entries if detail else [entry["name"] for entry in entries]

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        bucket, key = self._split(path)
        if not bucket:
            raise NotImplementedError("the root (every bucket) has no information: name a bucket")
        if key:
            try:
                found = self.client.head(self._url(path))
            except S3FileNotFoundError:
                pass  # maybe a directory: a prefix other keys continue
            else:
                return self._file_entry(
                    bucket, key, found.size, found.etag, _http_time(found.last_modified), found.storage_class
                )
        # A bucket, or a prefix: a directory if any key is under it. (A missing bucket raises from here.)
        under = next(
            iter(self.client.list_objects(self._url(f"{path}/" if key else bucket), page_size=1)), None
        )
        if under is None and key:
            raise FileNotFoundError(f"s3crt://{path}: no such object, and no key under {path}/")
        return self._directory_entry(path)

    def find(
        self,
        path: str,
        maxdepth: Optional[int] = None,
        withdirs: bool = False,
        detail: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Every file under ``path`` (and, with ``withdirs``, every directory), from one flat listing."""
        if maxdepth is not None:
            return super().find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs)
        path = self._strip_protocol(path)
        bucket, key = self._split(path)
        found: dict[str, dict[str, Any]] = {}
        prefix = f"{path}/" if key else f"{bucket}/"
        # Names alone come from the listing in parallel key ranges (docs/listing.md); details page by page.
        location = parse_s3_url(self._url(prefix))
        for entry in self.client.list_location(location, read_ahead=not detail, details=detail):
            name = f"{bucket}/{entry.key}"
            if withdirs:
                # Every directory between the one searched and this key.
                parent = posixpath.dirname(name)
                while len(parent) > len(path) and parent not in found:
                    found[parent] = self._directory_entry(parent)
                    parent = posixpath.dirname(parent)
            if not is_folder_marker(entry.key, entry.size):
                found[name] = self._listed_file(bucket, entry)
        if not found and key:
            # A file finds itself; a missing path finds nothing (as fsspec's find does).
            try:
                info = self.info(path)
            except FileNotFoundError:
                info = None
            if info is not None and info["type"] == "file":
                found[path] = info
        if withdirs and key and found and path not in found:
            try:
                if self.isdir(path):
                    found[path] = self._directory_entry(path)
            except FileNotFoundError:
                pass
        names = sorted(found)
        return {name: found[name] for name in names} if detail else names

    # --- directories (prefixes: nothing to create or remove) -----------------------------------------------

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        pass  # a directory appears with its first key

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        pass

    def rmdir(self, path: str) -> None:
        pass  # a directory disappears with its last key

    # --- reading ----------------------------------------------------------------------------------------

    def _open(
        self, path: str, mode: str = "rb", block_size: Any = None, autocommit: bool = True, **kwargs: Any
    ):  # type: ignore[no-untyped-def]
        path = self._strip_protocol(path)
        url = self._url(path)
        if mode == "rb":
            return self.client.open(url, "rb")
        if mode == "wb":
            return self.client.open(url, "wb")
        if mode == "xb":
            # Refused at once if the object exists, as a local file's "x" is; and atomically at close
            # (If-None-Match: *), should another writer create it meanwhile.
            if self.exists(path):
                raise FileExistsError(f"s3crt://{path} already exists (mode 'xb' creates a new object only)")
            return self.client.open(url, "wb", overwrite=False)
        raise ValueError(
            f"mode {mode!r} is not supported for s3crt://{path}: use 'rb', 'wb' or 'xb' (S3 has no append)"
        )

    def cat_file(
        self, path: str, start: Optional[int] = None, end: Optional[int] = None, **kwargs: Any
    ) -> bytes:
        path = self._strip_protocol(path)
        if start is None and end is None:
            with self.client.open(self._url(path), "rb") as stream:
                return stream.read()
        return self.cat_ranges([path], [start], [end])[0]

    def cat_ranges(
        self,
        paths: list[str],
        starts: Union[list[Optional[int]], Optional[int]],
        ends: Union[list[Optional[int]], Optional[int]],
        max_gap: Optional[int] = None,
        on_error: str = "raise",
        **kwargs: Any,
    ) -> list[Any]:
        """Byte ranges ``[start, end)`` of objects, fetched concurrently; ranges of one object closer than
        ``max_gap`` (default 1 MiB) are read as one GET. Negative offsets count from the object's end."""
        if not isinstance(paths, list):
            raise TypeError("paths must be a list")
        count = len(paths)
        starts = starts if isinstance(starts, list) else [starts] * count
        ends = ends if isinstance(ends, list) else [ends] * count
        if len(starts) != count or len(ends) != count:
            raise ValueError("paths, starts and ends must have the same length")
        stripped = [self._strip_protocol(p) for p in paths]
        sizes: dict[str, int] = {}
        ranges = []
        for path, start, end in zip(stripped, starts, ends):
            if (start is not None and start < 0) or end is None or end < 0:
                if path not in sizes:
                    sizes[path] = self.info(path)["size"]
                size = sizes[path]
                start = 0 if start is None else (start + size if start < 0 else start)
                end = size if end is None else (end + size if end < 0 else end)
            start = max(0, start or 0)
            ranges.append((path, start, max(start, end)))
        gap = MERGE_GAP_BYTES if max_gap is None else max_gap
        spans, placements = merge_ranges(ranges, gap)
        fetched = fetch_spans(self.client, spans, return_exceptions=on_error != "raise")
        results: list[Any] = []
        for (_path, start, end), (span_index, offset) in zip(ranges, placements):
            data = fetched[span_index]
            if isinstance(data, BaseException):
                results.append(data)
                continue
            results.append(bytes(memoryview(data)[offset : offset + end - start]))
        return results

    def cat(self, path: Any, recursive: bool = False, on_error: str = "raise", **kwargs: Any) -> Any:
        """Whole objects, fetched concurrently: ``bytes`` for one path, a dict path -> bytes for several."""
        paths = self.expand_path(path, recursive=recursive)
        if len(paths) == 1 and not isinstance(path, list) and paths[0] == self._strip_protocol(path):
            return self.cat_file(paths[0])
        files = paths
        if recursive:
            # expand_path names the directories too; only files have bytes.
            listed: set[str] = set()
            for root in path if isinstance(path, list) else [path]:
                listed.update(self.find(root))
            files = [p for p in paths if p in listed]
        spans = [(p, 0, None) for p in files]
        fetched = fetch_spans(self.client, spans, return_exceptions=on_error != "raise")
        out: dict[str, Any] = {}
        for name, data in zip(files, fetched):
            if isinstance(data, BaseException) and on_error == "omit":
                continue
            out[name] = data
        return out

    # --- writing ----------------------------------------------------------------------------------------

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        if mode not in ("overwrite", "create"):
            raise ValueError(f"mode must be 'overwrite' or 'create', not {mode!r}")
        path = self._strip_protocol(path)
        with self.client.open(self._url(path), "wb", overwrite=mode == "overwrite") as writer:
            writer.write(value)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        """Copies one object with S3's CopyObject (UploadPartCopy parts from 1 GB): no byte passes here."""
        path1 = self._strip_protocol(path1)
        path2 = self._strip_protocol(path2)
        if self.isdir(path1):
            return  # a directory is copied by its files; nothing to create for itself
        self.client.copy(self._url(path1), self._url(path2))

    def rm_file(self, path: str) -> None:
        path = self._strip_protocol(path)
        _bucket, key = self._split(path)
        if not key:
            raise IsADirectoryError(f"s3crt://{path} is a bucket; removing buckets is not supported")
        self.client.delete(self._url(path))

    def rm(self, path: Any, recursive: bool = False, maxdepth: Optional[int] = None) -> None:
        """Deletes every object the path expands to, DELETE_THREADS requests at a time. A directory's own
        name is deleted too: S3 answers DELETE of a key that does not exist with success, so no request is
        spent asking which names are directories."""
        names = [
            n for n in self.expand_path(path, recursive=recursive, maxdepth=maxdepth) if self._split(n)[1]
        ]
        if len(names) <= 1:
            for name in names:
                self.rm_file(name)
            return
        with ThreadPoolExecutor(
            min(DELETE_THREADS, len(names)), thread_name_prefix="torchdata-s3-rm"
        ) as pool:
            for _ in pool.map(self.rm_file, names):  # raises the first failure, in order
                pass

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def created(self, path: str) -> Any:
        raise NotImplementedError("S3 records no creation time (use modified())")

    def modified(self, path: str) -> datetime.datetime:
        """The object's LastModified (an aware datetime, UTC)."""
        info = self.info(path)
        if info["type"] != "file" or info["LastModified"] is None:
            raise IsADirectoryError(
                f"s3crt://{self._strip_protocol(path)} is not an object: it has no LastModified"
            )
        return info["LastModified"]


def _iso_time(text: str) -> Optional[datetime.datetime]:
    """A listing's LastModified ("2026-11-26T10:00:00.000Z"); None if the server sent none or garbage."""
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def _http_time(text: str) -> Optional[datetime.datetime]:
    """HeadObject's Last-Modified ("Thu, 26 Nov 2026 10:00:00 GMT"); None if absent or malformed."""
    try:
        return email.utils.parsedate_to_datetime(text) if text else None
    except (TypeError, ValueError):
        return None
