"""``S3FileSystem``: an fsspec file system whose every request goes through torchdata_s3's native core.

Paths are ``bucket/key`` (with or without ``s3crt://``, ``s3://`` or ``s3a://`` in front). S3 has no
directories: as in s3fs, a "directory" is a prefix that some key continues with ``/``; ``mkdir`` and ``rmdir``
change nothing, and a directory exists while a key is under it.

Listings (``ls``) are cached for ``listings_expiry_time`` seconds (LISTINGS_EXPIRY_SECONDS unless given;
``use_listings_cache=False`` turns the cache off), as fsspec's DirCache does. Every write, copy and delete
made through this file system forgets the cached listings of its path and of every parent, so this process
always sees its own changes; another process's changes show once the listing expires (or at once with
``refresh=True`` or ``invalidate_cache()``). The cache only ever answers positively: a path missing from a
cached listing is asked about again. ``find`` always asks S3, and a read never trusts a cached size (readers,
``cat_ranges`` and ``get`` learn it from S3).
"""

from __future__ import annotations

import datetime
import email.utils
import os
import posixpath
from typing import Any, Callable, Optional, Union

from fsspec.callbacks import DEFAULT_CALLBACK, Callback
from fsspec.spec import AbstractFileSystem
from fsspec.utils import isfilelike

from ..client import DELETE_BATCH_KEYS, ObjectSummary, S3Client, is_folder_marker
from ..config import S3Config
from ..errors import S3FileNotFoundError
from ..url import parse_s3_url
from ..writer import ObjectUploader, S3ObjectWriter
from .bulk import Bulk, CountedWhenDone
from .options import config_from_options, refuse_unknown
from .ranges import Span, fetch_spans, merge_ranges

PROTOCOLS = ("s3crt", "s3", "s3a")
# cat_ranges reads ranges of one object closer than this as one GET: a request costs a round trip (tens of
# ms on S3), while reading 1 MiB more costs about 10 ms at one connection's ~100 MB/s.
MERGE_GAP_BYTES = 1024 * 1024
# How long a cached listing is trusted: long enough for one library call's repeated ls/info of the same
# directory (pyarrow's dataset discovery, pandas' partitioned reads), short enough that another process's new
# objects show within seconds (s3fs's caches, which never expire by default, are a standing complaint).
LISTINGS_EXPIRY_SECONDS = 10.0


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
        storage_options.setdefault("listings_expiry_time", LISTINGS_EXPIRY_SECONDS)
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
        self._bulk = Bulk()
        # Per cached directory: (the listing indexed, its entries by name); stale once that listing is gone.
        self._listing_index: dict[str, tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]] = {}

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
    def _bucket_entry(name: str, created: str) -> dict[str, Any]:
        """A bucket as s3fs lists the root: a directory, with its creation time."""
        return {
            "name": name,
            "size": 0,
            "type": "directory",
            "StorageClass": "BUCKET",
            "CreationDate": _iso_time(created),
        }

    @staticmethod
    def _directory_entry(name: str) -> dict[str, Any]:
        return {"name": name, "size": 0, "type": "directory", "StorageClass": "DIRECTORY"}

    def ls(self, path: str, detail: bool = True, refresh: bool = False, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        if not path:
            buckets = [self._bucket_entry(name, created) for name, created in self.client.list_buckets()]
            return buckets if detail else [entry["name"] for entry in buckets]
        entries = None if refresh else self._cached_listing(path)
        if entries is None:
            entries = self._list_level(path)
        return [dict(entry) for entry in entries] if detail else [entry["name"] for entry in entries]

    def _list_level(self, path: str) -> list[dict[str, Any]]:
        """One level under ``path`` from S3 (a directory's listing is cached), or ``[info]`` for a file."""
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
            return [self.info(path, refresh=True)]
        entries.sort(key=lambda entry: entry["name"])
        self.dircache[path] = entries
        return entries

    def _cached_listing(self, path: str) -> Optional[list[dict[str, Any]]]:
        """``ls(path)`` from unexpired cached listings, or None when they cannot answer it."""
        try:
            return list(self.dircache[path])
        except KeyError:
            entry = self._cached_entry(path)
            return [entry] if entry is not None and entry["type"] == "file" else None

    def _cached_entry(self, path: str) -> Optional[dict[str, Any]]:
        """``path``'s entry in its parent's unexpired cached listing, or None (never a sign it is missing)."""
        parent = self._parent(path)
        try:
            listing = self.dircache[parent]
        except KeyError:
            return None
        # Indexed once per listing: pyarrow asks info() of every file it listed, which a scan per call made
        # quadratic in the directory's size.
        indexed = self._listing_index.get(parent)
        if indexed is None or indexed[0] is not listing:
            indexed = (listing, {entry["name"]: entry for entry in listing})
            self._listing_index[parent] = indexed
        entry = indexed[1].get(path)
        return dict(entry) if entry is not None else None

    def invalidate_cache(self, path: Optional[str] = None) -> None:
        """Forgets the cached listings of ``path`` and of every directory above it (all, without a path)."""
        if path is None:
            self.dircache.clear()
            self._listing_index.clear()
            return
        path = self._strip_protocol(path)
        while path:
            self.dircache.pop(path, None)
            self._listing_index.pop(path, None)
            path = self._parent(path)

    def info(self, path: str, refresh: bool = False, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        bucket, key = self._split(path)
        if not bucket:
            return {"name": "", "size": 0, "type": "directory"}  # the root, whose entries are the buckets
        if not refresh:
            cached = self._cached_entry(path)
            if cached is not None:
                return cached
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
        # One flat listing, in parallel key ranges (docs/listing.md).
        location = parse_s3_url(self._url(prefix))
        for entry in self.client.list_location(location, read_ahead=True, details=detail):
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
        if mode in ("wb", "xb"):
            location = parse_s3_url(url)
            if location.is_prefix:  # a bucket alone is a prefix too
                raise IsADirectoryError(f"s3crt://{path} names a bucket or prefix, not an object: add a key")
            # "xb" is refused at once if the object exists, as a local file's "x" is; and atomically at close
            # (If-None-Match: *), should another writer create it meanwhile.
            if mode == "xb" and self._object_exists(path):
                raise FileExistsError(f"s3crt://{path} already exists (mode 'xb' creates a new object only)")
            uploader = ObjectUploader(self.client, location, overwrite=mode == "wb")
            return _ListingClearingWriter(uploader, lambda: self.invalidate_cache(path))
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
                if path not in sizes:  # asked now: a cached listing's size may be stale
                    sizes[path] = self.client.head(self._url(path)).size
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
            if offset == 0 and len(data) == end - start:
                results.append(data)  # the span is this range alone: its bytes as read, not a copy
            else:
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
        spans: list[Span] = [(p, 0, None) for p in files]
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
        self._bulk.run(self._pipe_now, self._strip_protocol(path), value, mode == "overwrite")

    def _pipe_now(self, path: str, value: bytes, overwrite: bool) -> None:
        try:
            with self.client.open(self._url(path), "wb", overwrite=overwrite) as writer:
                writer.write(value)
        finally:
            self.invalidate_cache(path)

    def pipe(self, path: Any, value: Optional[bytes] = None, **kwargs: Any) -> None:
        """Writes ``value`` to ``path``, or each value of a dict ``{path: bytes}`` (BULK_REQUESTS at once)."""
        with self._bulk.concurrently():
            super().pipe(path, value, **kwargs)

    def put_file(
        self,
        lpath: str,
        rpath: str,
        callback: Callback = DEFAULT_CALLBACK,
        mode: str = "overwrite",
        **kwargs: Any,
    ) -> None:
        """Uploads a local file, read by the native core (parallel parts above the multipart threshold).
        ``mode="create"`` refuses, atomically, an object that exists (FileExistsError)."""
        if mode not in ("overwrite", "create"):
            raise ValueError(f"mode must be 'overwrite' or 'create', not {mode!r}")
        self._bulk.run(self._put_now, os.fspath(lpath), self._strip_protocol(rpath), callback, mode)

    def _put_now(self, lpath: str, rpath: str, callback: Callback, mode: str) -> None:
        if os.path.isdir(lpath):
            return  # a directory is uploaded by its files; S3 has nothing to create for itself
        size = os.path.getsize(lpath)
        callback.set_size(size)
        try:
            self.client.upload_file(lpath, self._url(rpath), overwrite=mode == "overwrite")
        finally:
            self.invalidate_cache(rpath)
        callback.relative_update(size)

    def put(
        self,
        lpath: Any,
        rpath: Any,
        recursive: bool = False,
        callback: Callback = DEFAULT_CALLBACK,
        **kwargs: Any,
    ) -> None:
        """fsspec's ``put`` (the same pairs of paths), its files uploaded BULK_REQUESTS at a time;
        ``callback`` counts each file when it has been uploaded."""
        self._in_bulk(super().put, lpath, rpath, recursive, callback, **kwargs)

    def get_file(
        self,
        rpath: str,
        lpath: Any,
        callback: Callback = DEFAULT_CALLBACK,
        outfile: Any = None,
        **kwargs: Any,
    ) -> None:
        """Downloads an object into a local file: parts fetched in parallel and written at their offsets by
        the native core, into a temporary file that replaces ``lpath`` once complete."""
        if outfile is not None or isfilelike(lpath):
            super().get_file(rpath, lpath, callback=callback, outfile=outfile, **kwargs)
            return
        self._bulk.run(self._get_now, self._strip_protocol(rpath), os.fspath(lpath), callback)

    def _get_now(self, rpath: str, lpath: str, callback: Callback) -> None:
        if not os.path.isdir(lpath):
            os.makedirs(os.path.dirname(os.path.abspath(lpath)), exist_ok=True)
            try:
                self.client.download_file(self._url(rpath), lpath)
            except S3FileNotFoundError:
                if not self.isdir(rpath):
                    raise
                os.makedirs(lpath, exist_ok=True)  # a directory: made here; its files come on their own
                return
            except IsADirectoryError:
                pass  # made meanwhile, for a file under it (get's files download concurrently)
            else:
                size = os.path.getsize(lpath)
                callback.set_size(size)
                callback.relative_update(size)
                return
        if not self.isdir(rpath):
            raise IsADirectoryError(f"cannot download s3crt://{rpath} to {lpath}: it is a local directory")

    def get(
        self,
        rpath: Any,
        lpath: Any,
        recursive: bool = False,
        callback: Callback = DEFAULT_CALLBACK,
        **kwargs: Any,
    ) -> None:
        """fsspec's ``get`` (the same pairs of paths), its files downloaded BULK_REQUESTS at a time;
        ``callback`` counts each file when it has been downloaded."""
        self._in_bulk(super().get, rpath, lpath, recursive, callback, **kwargs)

    def _in_bulk(
        self,
        transfer: Callable[..., Any],
        source: Any,
        target: Any,
        recursive: bool,
        callback: Callback,
        **kwargs: Any,
    ) -> None:
        """Runs fsspec's ``get`` or ``put`` with its per-file calls queued (see :mod:`.bulk`)."""
        with self._bulk.concurrently(progress=callback):
            transfer(source, target, recursive=recursive, callback=CountedWhenDone(callback), **kwargs)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        """Copies one object with S3's CopyObject (UploadPartCopy parts from 1 GB): no byte passes here."""
        path1 = self._strip_protocol(path1)
        path2 = self._strip_protocol(path2)
        if self.isdir(path1):
            return  # a directory is copied by its files; nothing to create for itself
        try:
            self.client.copy(self._url(path1), self._url(path2))
        finally:
            self.invalidate_cache(path2)

    def rm_file(self, path: str) -> None:
        path = self._strip_protocol(path)
        _bucket, key = self._split(path)
        if not key:
            raise IsADirectoryError(f"s3crt://{path} is a bucket; removing buckets is not supported")
        self._bulk.run(self._rm_now, path)

    def _rm_now(self, path: str) -> None:
        try:
            self.client.delete(self._url(path))
        finally:
            self.invalidate_cache(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: Optional[int] = None) -> None:
        """Deletes every object the path expands to: DeleteObjects requests of up to 1,000 keys, several at
        once. A directory's own name is in the batch too: S3 counts a key that does not exist as deleted, so
        no request is spent asking which names are directories."""
        names = [
            n for n in self.expand_path(path, recursive=recursive, maxdepth=maxdepth) if self._split(n)[1]
        ]
        if len(names) == 1:
            self.rm_file(names[0])
            return
        with self._bulk.concurrently():
            for start in range(0, len(names), DELETE_BATCH_KEYS):
                self._bulk.run(self._rm_batch, names[start : start + DELETE_BATCH_KEYS])

    def _rm_batch(self, names: list[str]) -> None:
        try:
            self.client.delete_many([self._url(name) for name in names])
        finally:
            for name in names:
                self.invalidate_cache(name)

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def _object_exists(self, path: str) -> bool:
        """Whether an object is at ``path`` now (HeadObject: never the cache, never a directory)."""
        try:
            self.client.head(self._url(path))
        except S3FileNotFoundError:
            return False
        return True

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


class _ListingClearingWriter(S3ObjectWriter):
    """The package's writer, which also makes the file system forget its path's cached listings once closed
    (committed or not): the new object must show in this process's next ``ls``."""

    def __init__(self, uploader: ObjectUploader, forget: Callable[[], None]) -> None:
        super().__init__(uploader)
        self._forget = forget

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._forget()
