"""A picklable S3 client: configuration plus a native CRT client created lazily in each process.

CRT threads do not survive ``fork()``: a native client made in a parent is never used (nor freed) in a child;
the child makes its own on first use. DataLoader workers therefore work under fork, spawn and forkserver.
"""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any, Callable, NamedTuple, Optional, Union

from . import _core
from .config import S3Config, event_loop_threads, undefined_profile
from .errors import (
    CREDENTIALS_HOW_TO,
    NOT_AN_S3_API_HINT,
    S3Error,
    S3FileNotFoundError,
    credentials_unavailable,
    error_from_native,
    with_hint,
)
from .listing import ParallelListing
from .reader import ObjectReader, S3ObjectStream
from .url import S3Url, parse_s3_url
from .writer import ObjectUploader, S3ObjectWriter

__all__ = ["ObjectInfo", "ObjectSummary", "S3Client"]

# Native clients kept for reuse, most recently used last. A process usually needs one or two; one made past
# this many drops the least recently used from here (streams and calls still using it keep it alive until they
# end). Without a bound, a process that tries many endpoints (a test suite, a notebook) kept every client's
# connections and event-loop threads until it exited: 4 event loops and 5 threads each.
KEPT_NATIVE_CLIENTS = 8
_native_clients: OrderedDict[tuple, _core.S3Client] = OrderedDict()
_native_clients_pid = os.getpid()
_native_clients_lock = threading.Lock()
# Bumped whenever a native client leaves the table (eviction, fork): S3Client instances remember the native
# they were given with the generation it was given in, and ask the table again only when it has changed.
# Every request used to look the client up by hashing its configuration (about 20 fields), under a lock.
_native_generation = 0


def _forget_native_clients() -> None:
    # In a fork child: drop the inherited natives. Their destructors see another pid and leak them on purpose.
    global _native_clients_pid, _native_generation
    _native_clients.clear()
    _native_clients_pid = os.getpid()
    _native_generation += 1


def _after_fork_in_child() -> None:
    # Another thread of the parent may have held the lock at the fork (it is held while a native client is
    # made, GIL released): the child's copy would stay held forever, and its first request would hang.
    global _native_clients_lock
    _native_clients_lock = threading.Lock()
    _forget_native_clients()


os.register_at_fork(after_in_child=_after_fork_in_child)


@functools.lru_cache(maxsize=64)
def _native_key(config: S3Config) -> tuple:
    """What the native client of `config` is made from: configurations that differ only in what Python
    decides (cache, retention, loader options) share one client. Memoized: asked for on every request."""
    return tuple(config.native_options().items())


class CredentialsSetupError(Exception):
    """The native client cannot be made because its credentials cannot be set up (no request was sent)."""

    def __init__(self, problem: str, hint: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.hint = hint


def native_client(config: S3Config) -> _core.S3Client:
    """The process-wide native client for `config`: one connection pool per native configuration and process
    (see :data:`KEPT_NATIVE_CLIENTS`).

    Raises:
        CredentialsSetupError: the profile named by the config is not defined, or the CRT could not build
            the credentials provider.
    """
    return _native_client_and_generation(config)[0]


def _native_client_and_generation(config: S3Config) -> tuple[_core.S3Client, int]:
    """:func:`native_client`, and the table's generation it was current in (read under the same lock)."""
    global _native_generation
    key = _native_key(config)
    evicted = None
    with _native_clients_lock:
        if _native_clients_pid != os.getpid():  # forked without the at-fork hook (e.g. os.fork in C code)
            _forget_native_clients()
        client = _native_clients.get(key)
        if client is not None:
            _native_clients.move_to_end(key)
            return client, _native_generation
        options = dict(key)
        named_profile = config.profile if options["credentials"] == "profile" else None
        if named_profile:
            problem = undefined_profile(named_profile)
            if problem:
                raise CredentialsSetupError(problem, "")
        try:
            client = _core.S3Client(**options, event_loop_threads=event_loop_threads())
        except RuntimeError as error:
            if str(error).startswith("node memory budget"):
                raise OSError(
                    f"{error}; give node_memory_budget_file= (or TORCHDATA_S3_NODE_MEMORY_BUDGET_FILE) a "
                    "path this user may create, or leave node_memory_budget_bytes unset for no node budget"
                ) from None
            if "credentials provider" not in str(error):
                raise
            source = f" from the AWS profile {named_profile!r}" if named_profile else ""
            raise CredentialsSetupError(
                f"no credentials could be set up{source} ({error})", CREDENTIALS_HOW_TO
            ) from None
        _native_clients[key] = client
        if len(_native_clients) > KEPT_NATIVE_CLIENTS:
            _key, evicted = _native_clients.popitem(last=False)
            _native_generation += 1
        generation = _native_generation
    # A client nothing else holds shuts down here, waiting for its connections to close: outside the lock.
    del evicted
    return client, generation


def _list_failure(location: S3Url, error: Exception) -> Exception:
    """What a failed ListObjectsV2 page raises: its S3Error, or for a 200 answer that is no ListObjectsV2
    result (a web page, a proxy's portal, another API: ValueError from the parser), an S3Error saying so. The
    request failed; the caller's input was fine."""
    return _listing_failure("ListObjectsV2", f"s3://{location.bucket}/{location.key}", error)


def _listing_failure(operation: str, url: str, error: Exception) -> Exception:
    """:func:`_list_failure` for any listing operation."""
    if isinstance(error, S3Error) or not isinstance(error, ValueError):
        return error
    return S3Error(
        with_hint(
            f"{operation} {url} failed: the endpoint answered with something that is not a "
            f"{operation} result ({error})",
            NOT_AN_S3_API_HINT,
        ),
        url=url,
        operation=operation,
        http_status=200,
    )


def is_folder_marker(key: str, size: int) -> bool:
    """Zero-byte keys ending in "/" are the "folders" consoles create, not data: every door skips them."""
    return size == 0 and key.endswith("/")


class ObjectSummary(tuple):
    """``(key, size, etag)`` of one listed object; listed with ``details``, also its ``last_modified``
    (ISO 8601, as S3 sends it) and ``storage_class``."""

    __slots__ = ()

    @property
    def key(self) -> str:
        return self[0]

    @property
    def size(self) -> int:
        return self[1]

    @property
    def etag(self) -> str:
        return self[2]

    @property
    def last_modified(self) -> str:
        return self[3] if len(self) > 3 else ""

    @property
    def storage_class(self) -> str:
        return self[4] if len(self) > 4 else ""


class ObjectInfo(NamedTuple):
    """What HeadObject tells about one object (``last_modified``: the Last-Modified header, an HTTP date;
    ``storage_class``: x-amz-storage-class, which S3 leaves out for STANDARD)."""

    url: str
    size: int
    etag: str
    last_modified: str = ""
    storage_class: str = ""


class _ListPage:
    """One ListObjectsV2 page, fetched by :meth:`run` (on the caller's thread or another) and handed over by
    :meth:`result`, which raises the request's failure on the consumer's thread."""

    def __init__(self, fetch: Callable[[], tuple[list, list, Optional[str]]]) -> None:
        self._fetch = fetch
        self._done = threading.Event()
        self._value: Optional[tuple[list, list, Optional[str]]] = None
        self._error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            self._value = self._fetch()
        except BaseException as error:  # handed to the consumer by result()
            self._error = error
        finally:
            self._done.set()

    def result(self) -> tuple[list, list, Optional[str]]:
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


class S3Client:
    """Lists and opens S3 objects. Cheap to create and to pickle; the native client is shared per process.

    Args:
        config: the configuration [None: :meth:`S3Config.resolve` from the environment].
    """

    def __init__(self, config: Optional[S3Config] = None) -> None:
        self.config = config if config is not None else S3Config.resolve()
        # (generation, pid, native): the native this instance was last given, valid while neither the
        # table's generation nor the process changed.
        self._native: Optional[tuple[int, int, _core.S3Client]] = None

    def __repr__(self) -> str:
        return f"S3Client({self.config!r})"

    def __getstate__(self) -> dict:
        return {"config": self.config}  # never the native client: each process makes its own

    def __setstate__(self, state: dict) -> None:
        self.config = state["config"]
        self._native = None

    def list_objects(
        self, url: str, *, delimiter: str = "", page_size: Optional[int] = None, details: bool = False
    ) -> Iterator[ObjectSummary]:
        """Yields every object whose key starts with the URL's key, in S3's (lexicographic) order.

        ``s3://bucket`` and ``s3://bucket/`` list the whole bucket; ``s3://bucket/fo`` lists ``fo*``.
        Pages are fetched one at a time as iteration proceeds. With ``details``, each summary also has its
        ``last_modified`` and ``storage_class``.

        Raises:
            InvalidS3UrlError, S3FileNotFoundError (no such bucket), S3PermissionError, S3NetworkError, ...
        """
        return self.list_location(
            parse_s3_url(url), delimiter=delimiter, page_size=page_size, details=details
        )

    def _native_for(self, location: S3Url, operation: str) -> _core.S3Client:
        """The native client, or the S3PermissionError a request for `location` fails with without one."""
        remembered = self._native
        if remembered is not None and remembered[0] == _native_generation and remembered[1] == os.getpid():
            return remembered[2]
        try:
            client, generation = _native_client_and_generation(self.config)
        except CredentialsSetupError as failure:
            raise credentials_unavailable(str(location), operation, failure.problem, failure.hint) from None
        self._native = (generation, os.getpid(), client)
        return client

    @property
    def node_budget(self) -> Optional[_core.NodeBudget]:
        """The node's memory budget this client's streams and writers take from (``config.
        node_memory_budget_bytes``), or None: its ``in_use``, ``peak`` and ``held_here`` bytes."""
        return self._native_for(S3Url("", ""), "GetObject").node_budget

    def list_buckets(self) -> list[tuple[str, str]]:
        """Every bucket these credentials own (ListBuckets, page after page), as ``(name, creation date)``
        with the date in ISO 8601 as S3 sends it.

        Raises:
            S3PermissionError (ListBuckets denied), S3Error (the endpoint answered something else).
        """
        native = self._native_for(S3Url("", ""), "ListBuckets")
        buckets: list[tuple[str, str]] = []
        token = ""
        while True:
            try:
                page, next_token = native.list_buckets(
                    continuation_token=token, timeout_ms=self.config.request_timeout_ms
                )
            except ValueError as error:  # an S3Error, or a 200 answer that is no ListBuckets result
                raise _listing_failure("ListBuckets", "s3://", error) from None
            buckets.extend(page)
            if next_token is None:
                return buckets
            if next_token == token:
                raise S3Error(
                    f"ListBuckets s3:// failed: the endpoint answered the token {token!r} with itself"
                )
            token = next_token

    def list_location(
        self,
        location: S3Url,
        *,
        delimiter: str = "",
        page_size: Optional[int] = None,
        read_ahead: bool = False,
        details: bool = False,
    ) -> Iterator[ObjectSummary]:
        """:meth:`list_objects` for an already parsed URL. With ``read_ahead``, each page's successor is
        requested (on a thread of its own, which exit waits for) as soon as the page arrives, before its
        objects are yielded: a consumer slower than a round trip then never waits for a page but the first.
        A failed page raises when it is reached, after every object before it, as without read-ahead."""
        for page in self.list_pages(
            location, delimiter=delimiter, page_size=page_size, read_ahead=read_ahead, details=details
        ):
            yield from map(ObjectSummary, page)

    def list_pages(
        self,
        location: S3Url,
        *,
        delimiter: str = "",
        page_size: Optional[int] = None,
        read_ahead: bool = False,
        details: bool = False,
    ) -> Iterator[list[tuple[Any, ...]]]:
        """:meth:`list_location`'s ``(key, size, etag)`` entries (with ``details``, LastModified and
        StorageClass after them) a page at a time (plain tuples): for doors that turn each into something
        else, without a frame and an ObjectSummary per key on the way."""
        native = self._native_for(location, "ListObjectsV2")
        if read_ahead and not delimiter and self.config.max_list_requests > 1:
            listing = ParallelListing(
                native,
                location,
                max_requests=self.config.max_list_requests,
                page_size=page_size,
                timeout_ms=self.config.request_timeout_ms,
                failure_of=functools.partial(_list_failure, location),
                details=details,
            )
            yield from listing.batches()
            return

        def page_from(token: str) -> _ListPage:
            fetch = functools.partial(self._list_page, native, location, delimiter, token, page_size, details)
            return _ListPage(fetch)

        page = page_from("")
        page.run()
        while True:
            objects, _prefixes, next_token = page.result()
            if next_token is not None:
                following = page_from(next_token)
                if read_ahead:
                    # Not a daemon: at exit the interpreter waits for this one request (at most
                    # request_timeout_ms) rather than ending the thread inside native code, whose forced
                    # unwind through the binding the sanitizer build reports as an error.
                    ahead = threading.Thread(
                        target=following.run, name="torchdata-s3-list-ahead", daemon=False
                    )
                    ahead.start()
            if objects:
                yield objects
            if next_token is None:
                return
            if not read_ahead:
                following.run()  # only now that its objects are reached
            page = following

    def list_directory(self, url: str) -> tuple[list[ObjectSummary], list[str]]:
        """One level below a prefix, as a file system sees it: the objects directly under it (with their
        details: last modified, storage class) and the common prefixes (sub-"directories", each ending in "/")
        one level down, every page of them.

        ``s3://bucket/dir/`` and ``s3://bucket/dir`` list the same level (a key is a "directory" by its
        trailing "/"); ``s3://bucket`` lists the bucket's top level.

        Raises:
            InvalidS3UrlError, S3FileNotFoundError (no such bucket), S3PermissionError, S3NetworkError, ...
        """
        location = parse_s3_url(url)
        if location.key and not location.key.endswith("/"):
            location = location._replace(key=location.key + "/")
        native = self._native_for(location, "ListObjectsV2")
        objects: list[ObjectSummary] = []
        prefixes: list[str] = []
        token: Optional[str] = ""
        while token is not None:
            page, page_prefixes, token = self._list_page(native, location, "/", token, None, details=True)
            objects.extend(map(ObjectSummary, page))
            prefixes.extend(page_prefixes)
        return objects, prefixes

    def _list_page(
        self,
        native: _core.S3Client,
        location: S3Url,
        delimiter: str,
        token: str,
        page_size: Optional[int],
        details: bool = False,
    ) -> tuple[list, list, Optional[str]]:
        """One ListObjectsV2 page: its (key, size, etag) entries, its common prefixes and the next page's
        token (None: last)."""
        try:
            return native.list_objects_v2(
                location.bucket,
                prefix=location.key,
                delimiter=delimiter,
                continuation_token=token,
                max_keys=page_size or 0,
                timeout_ms=self.config.request_timeout_ms,
                details=details,
            )
        except ValueError as error:  # an S3Error is also a ValueError (for code written for the original)
            raise _list_failure(location, error) from None

    def open(
        self,
        url: str,
        mode: str = "rb",
        *,
        overwrite: bool = True,
        checksum: Optional[str] = None,
        window_bytes: Optional[int] = None,
    ) -> Union[S3ObjectStream, S3ObjectWriter]:
        """Opens one object as a binary file object: ``"rb"`` to read it, ``"wb"`` to write it.

        ``"rb"``: a seekable reader; nothing is fetched before the first read. Reads from the start fetch
        the object as parallel ranged GETs, ahead of the reader; ``seek`` goes anywhere, and a read away from
        what the stream holds fetches about what it asks for (see :mod:`torchdata_s3.reader`).
        ``seek(-n, 2)`` first (zip, Parquet) fetches only the object's tail.

        ``"wb"``: an :class:`~torchdata_s3.writer.S3ObjectWriter`; the object appears when it is closed
        (see :mod:`torchdata_s3.writer`).

        Args:
            url: ``s3://bucket/key``.
            mode: ``"rb"`` or ``"wb"``.
            overwrite: (``"wb"``) replace an existing object [True]; False refuses to (If-None-Match: *):
                closing then raises S3ObjectExistsError if the object exists.
            checksum: (``"wb"``) ``"crc32c"`` or ``"crc64nvme"``: the CRT computes it while sending and S3
                verifies it [None: no checksum beyond TCP's and TLS's].
            window_bytes: (``"rb"``) how far reading may run ahead [None: ``config.read_window_bytes``].

        Raises:
            InvalidS3UrlError: a malformed URL. IsADirectoryError: the URL names a prefix. ValueError: another
            mode. Errors of the requests (S3FileNotFoundError, ...) surface on the first read, seek from the
            end or ``.size``; for writers, on the write that starts the upload or on ``close()``.
        """
        if mode not in ("rb", "wb"):
            raise ValueError(f"mode must be 'rb' or 'wb' for {url!r}, not {mode!r}")
        location = parse_s3_url(url)
        if location.is_prefix:
            raise IsADirectoryError(
                f"{url!r} names a prefix, not an object; list it or drop the trailing '/'"
            )
        if mode == "wb":
            if window_bytes is not None:
                raise ValueError(f"window_bytes= applies to readers (mode 'rb'), not to writing {url!r}")
            return S3ObjectWriter(ObjectUploader(self, location, overwrite=overwrite, checksum=checksum))
        if checksum is not None or not overwrite:
            raise ValueError(f"overwrite= and checksum= apply to writers (mode 'wb'), not to reading {url!r}")
        return S3ObjectStream(ObjectReader(self, location, window_bytes=window_bytes))

    def head(self, url: str) -> ObjectInfo:
        """Size and ETag of one object (HeadObject).

        Raises:
            InvalidS3UrlError, S3FileNotFoundError (no such key or bucket), S3PermissionError, ...; S3Error
            for an answer without a valid Content-Length.
        """
        location = self._object_location(url)
        length, etag, last_modified, storage_class = self._native_for(location, "HeadObject").head_object(
            location.bucket, location.key, timeout_ms=self.config.request_timeout_ms
        )
        if not length.isdecimal():
            # S3 always sends it; without it the size is unknown, not 0 (a broken proxy or gateway).
            raise S3Error(
                with_hint(
                    f"HeadObject {location} failed: the endpoint answered without a valid Content-Length "
                    f"({length!r})",
                    NOT_AN_S3_API_HINT,
                ),
                url=str(location),
                operation="HeadObject",
            )
        return ObjectInfo(str(location), int(length), etag, last_modified, storage_class)

    def delete(self, url: str) -> None:
        """Deletes one object (DeleteObject). Deleting a key that does not exist succeeds, as in S3.

        Raises:
            InvalidS3UrlError, S3FileNotFoundError (no such bucket), S3PermissionError, ...
        """
        location = self._object_location(url)
        self._native_for(location, "DeleteObject").delete_object(
            location.bucket, location.key, timeout_ms=self.config.request_timeout_ms
        )

    def delete_many(self, urls: Iterable[str]) -> None:
        """Deletes many objects, DELETE_BATCH_KEYS of one bucket per DeleteObjects request (a key XML cannot
        carry, with a control character, gets a DeleteObject of its own). Keys that do not exist count as
        deleted. Every batch is sent even if one fails; then the first key S3 did not delete raises, its
        message counting the others.

        Raises:
            InvalidS3UrlError, IsADirectoryError (a prefix), S3PermissionError, S3FileNotFoundError (no such
            bucket), ...
        """
        by_bucket: dict[str, list[str]] = {}
        for url in urls:
            location = self._object_location(url)
            by_bucket.setdefault(location.bucket, []).append(location.key)
        failures: list[S3Error] = []
        for bucket, keys in by_bucket.items():
            batched = []
            for key in keys:
                if _has_xml_forbidden_character(key):
                    self.delete(f"s3://{bucket}/{key}")
                else:
                    batched.append(key)
            if not batched:
                continue
            native = self._native_for(parse_s3_url(f"s3://{bucket}/"), "DeleteObjects")
            for start in range(0, len(batched), DELETE_BATCH_KEYS):
                refused = native.delete_objects(
                    bucket,
                    batched[start : start + DELETE_BATCH_KEYS],
                    timeout_ms=self.config.request_timeout_ms,
                )
                failures += [_delete_refused(bucket, key, code, message) for key, code, message in refused]
        if failures:
            first = failures[0]
            if len(failures) > 1:
                first.args = (f"{first.args[0]} (and {len(failures) - 1} other key(s) not deleted)",)
            raise first

    def copy(self, source_url: str, url: str) -> None:
        """Copies one object to another key (CopyObject, or UploadPartCopy parts from 1 GB): S3 copies the
        bytes, none pass through this process. Both must be on this client's endpoint.

        Raises:
            InvalidS3UrlError, S3FileNotFoundError (no such source key or bucket), S3PermissionError, ...
        """
        source = self._object_location(source_url)
        location = self._object_location(url)
        try:
            self._native_for(location, "CopyObject").copy_object(
                source.bucket,
                source.key,
                location.bucket,
                location.key,
                # No limit on the whole: a copy takes as long as the store copies (UploadPartCopy parts in
                # parallel for a large one). Each request is still bounded: silent connections are dropped,
                # and each copy request's answer is given completion_timeout_ms.
                timeout_ms=0,
            )
        except S3FileNotFoundError as error:
            if error.operation != "HeadObject":
                raise
            # The CRT asks the source's size first; its error names the destination, the copy's own URL.
            raise S3FileNotFoundError(
                f"CopyObject {source} -> {location} failed: the source {source} does not exist "
                f"(HeadObject: HTTP {error.http_status}). Check its bucket name and key.",
                url=str(source),
                operation="HeadObject",
                http_status=error.http_status,
                s3_error_code=error.s3_error_code,
                crt_error=error.crt_error,
            ) from None

    def download_file(self, url: str, path: Union[str, os.PathLike]) -> None:
        """Writes one object to a local file, its parts fetched in parallel and written at their offsets by
        the native core (no byte passes through Python), past the page cache where the file system allows
        (``config.direct_io_downloads``). The bytes land in a temporary file beside ``path`` that replaces it
        only once complete: a failed download leaves ``path`` as it was.

        Raises:
            InvalidS3UrlError, S3FileNotFoundError (no such key or bucket), S3PermissionError, OSError (the
            local directory is missing or not writable), ...
        """
        location = self._object_location(url)
        target = os.path.abspath(os.fspath(path))
        if os.path.isdir(target):
            raise IsADirectoryError(f"cannot download {location} to {target}: it is a directory")
        directory, name = os.path.split(target)
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"cannot download {location} to {target}: {directory} does not exist")
        partial = os.path.join(directory, f".{name}.{os.getpid()}.{threading.get_ident()}.partial")
        native = self._native_for(location, "GetObject")
        try:
            native.download_file(
                location.bucket, location.key, partial, direct_io=self.config.direct_io_downloads
            )
            os.replace(partial, target)
        finally:
            # The CRT deletes its file when the request fails; a failed os.replace leaves it behind.
            if os.path.exists(partial):
                os.unlink(partial)

    def upload_file(self, path: Union[str, os.PathLike], url: str, *, overwrite: bool = True) -> None:
        """Uploads a local file as one object, read by the native core (parallel parts above the multipart
        threshold; no byte passes through Python). Nothing is visible before the whole file is stored. With
        ``overwrite=False`` the upload is refused, atomically (``If-None-Match: *``), if the object exists.

        Raises:
            InvalidS3UrlError, FileNotFoundError (no such local file), IsADirectoryError,
            S3ObjectExistsError (``overwrite=False``), S3PermissionError, ...
        """
        location = self._object_location(url)
        source = os.fspath(path)
        if os.path.isdir(source):
            raise IsADirectoryError(f"cannot upload {source} to {location}: it is a directory")
        if not os.path.isfile(source):
            raise FileNotFoundError(f"cannot upload {source} to {location}: no such file")
        # As many parts in flight as a writer may have unacknowledged (write_window_bytes): each holds a part
        # in memory, and more only queue at the server (4 GiB to the benchmark endpoint: 125 parts at once ran
        # at 371-433 MB/s with 2 GiB of RSS, 16 at 651-696 MB/s).
        parts = max(1, self.config.write_window_bytes // self.config.part_size_bytes)
        self._native_for(location, "PutObject").upload_file(
            source, location.bucket, location.key, if_none_match=not overwrite, max_parts_in_flight=parts
        )

    @staticmethod
    def _object_location(url: str) -> S3Url:
        location = parse_s3_url(url)
        if location.is_prefix:
            raise IsADirectoryError(f"{url!r} names a prefix, not an object; drop the trailing '/'")
        return location

    def open_native(
        self,
        location: S3Url,
        *,
        byte_range: Optional[tuple[int, int]] = None,
        suffix_bytes: int = 0,
        if_match: str = "",
        if_none_match: str = "",
        window_bytes: Optional[int] = None,
        part_size_bytes: Optional[int] = None,
        size_hint: Optional[int] = None,
        landing_capacity: int = 0,
        guessed_length: int = 0,
    ) -> _core.ObjectStream:
        """Starts one GET and returns its native, forward-only stream at once (the mechanism under
        :meth:`open` and the loader).

        Args:
            location: the object.
            byte_range: ``(first, last)`` inclusive byte offsets to fetch only part of the object.
            suffix_bytes: fetch only the object's last ``suffix_bytes`` (exclusive with byte_range).
            if_match: fail with S3IntegrityError unless the object still has this ETag.
            if_none_match: fail with an S3Error of ``http_status`` 304 (Not Modified) if the object still has
                this ETag; otherwise the GET delivers the object as usual (the local cache's check).
            window_bytes: how far the download may run ahead of the reader [config.read_window_bytes].
            part_size_bytes: size of each ranged GET [config.part_size_bytes].
            size_hint: the object's size if known (a listing's): a stream takes no more of the node's memory
                budget than that.
            landing_capacity: for a whole object of unknown size, a guess of the most it may be (the loader's,
                from the objects before it). If the object fills at least half of it (and no more than half a
                part), it is received straight into the ``bytes`` a read of all of it returns. 0: no guess.
            guessed_length: for a whole object of unknown size, a guess of the least it holds (the loader's,
                from the objects before it). Its parts up to there are received straight into the ``bytes``
                that ``read(n)`` returns, as later parts are once its size is known (a shorter object leaves
                some of that memory unused). 0: no guess.

        Errors of the request surface on the first read (or ``.size``), not here.
        """
        if byte_range is not None:
            first, last = byte_range
            if first < 0 or last < first:
                raise ValueError(
                    f"byte_range {byte_range!r} for {location} must be (first, last) with 0 <= first <= last"
                )
        # In the binding's order, not by keyword: matching eleven keywords cost about a quarter of the native
        # call, once per object loaded (bindings.cpp, get_object).
        return self._native_for(location, "GetObject").get_object(
            location.bucket,
            location.key,
            byte_range,
            suffix_bytes,
            if_match,
            if_none_match,
            window_bytes or 0,
            self.config.request_timeout_ms,
            part_size_bytes or 0,
            size_hint or 0,
            landing_capacity,
            guessed_length,
        )


# Keys per DeleteObjects request: S3's limit.
DELETE_BATCH_KEYS = 1000


def _has_xml_forbidden_character(key: str) -> bool:
    """Whether XML 1.0 cannot carry the key: control characters other than tab, line feed, carriage return."""
    return any(ord(c) < 0x20 and c not in "\t\n\r" for c in key)


def _delete_refused(bucket: str, key: str, code: str, message: str) -> S3Error:
    """The typed error for one key a DeleteObjects answer says was not deleted."""
    return error_from_native(
        {
            "kind": "status",
            "operation": "DeleteObjects",
            "bucket": bucket,
            "key": key,
            "http_status": 0,
            "s3_error_code": code,
            "s3_error_message": message,
            "crt_error_name": "",
            "crt_error_message": "",
            "detail": "",
        }
    )
