"""Listing a prefix with many ListObjectsV2 requests in flight, yielding keys in S3's order as they arrive.

One stream of pages lists 1,000 keys per round trip: 10^6 keys 100 ms away take 100 s. This module splits
the prefix into contiguous key ranges, each listed by its own chain of pages, all in flight together
(``S3Config.max_list_requests``), and yields the ranges in key order as their pages arrive. The requests
are the native core's (``ListPageRequest``, answered into a ``CompletionQueue``); the policy is here:

- **Folders fan out.** Every page is asked for with the delimiter ``/``, so a page names the folders under
  its range instead of listing their keys one page at a time; each folder becomes a range of its own,
  listed in parallel, at its place in the order.
- **A flat key space splits.** A range whose remaining keys would take several pages is cut in two with
  ``StartAfter`` at a key halfway between where it stands and where it ends, halfway as measured over the
  characters seen in keys so far (hashed names, numbered files), and the density its own pages showed.
  Splits follow the pages: each page lets its range be cut once more, the range that looks longest first,
  so the ranges double per round trip where keys are, and a guess where there are none costs one request.
  A split point never holds a ``/`` past its range's prefix, so a folder is never cut in two (S3 would
  name it on both sides).
- **Small folders are listed together.** Where a page names more folders than there are requests to send
  and the first page showed folders of fewer keys than a page holds, runs of consecutive folders are listed
  as one range without the delimiter (its keys are those folders' keys), about a page's worth per range,
  instead of a request per folder. A page of such a range that lies within one folder hands the rest of that
  folder to a range of its own, which splits as a flat key space would.
- **The first keys come after one round trip.** The first page is asked for without a delimiter, so its
  keys are yielded at once even when the prefix is a tree; the ranges after it skip what it covered.
- **Exact and bounded.** Every key is yielded once, in order: a range drops what its answer holds beyond its
  end (the range after it lists that itself). Pages that arrive ahead of the reader wait within
  ``BUFFERED_KEYS``; past that, only the earliest range is asked for more.
- **Servers without StartAfter** (S3 Express directory buckets refuse it): the first refusal switches the
  listing to one stream of pages, which resumes after the last key yielded; a log line says why.

A failed page raises when its range is reached, after every key before it, as a single stream would.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import logging
from collections import deque
from collections.abc import Iterator
from typing import Any, Callable, Optional, Union

from . import _core
from .errors import S3Error
from .url import S3Url

__all__ = ["DELIMITER", "ParallelListing"]

logger = logging.getLogger(__name__)

DELIMITER = "/"
# Keys received but not yet yielded, across all ranges, beyond which at most BEHIND_REQUESTS requests are
# in flight, for the earliest ranges: about 130 MB of Python tuples. (A reader slower than the listing then
# bounds its memory; the range it waits for is always among the earliest.)
BUFFERED_KEYS = 500_000
BEHIND_REQUESTS = 16
# A range is split only when it looks longer than this many pages: shorter ones finish before a split pays.
SPLIT_MIN_PAGES = 2
# Characters of a key, past its range's prefix, that split points are computed over (numbered names vary
# late: "n01440764_10026.JPEG").
SPLIT_DIGITS = 24
# S3's page size when the caller does not set one.
DEFAULT_PAGE_KEYS = 1000
# Pages whose every key teaches the alphabet; later pages, their first and last keys.
ALPHABET_PAGES = 8
# The greatest code point: a key's folder followed by it sorts after every key in that folder but those
# starting with it (dropped on arrival, see _Range.floor).
LAST_CHARACTER = "\U0010ffff"
# Retries in a row of a page S3 still answered 503 SlowDown after the CRT's own retries; each halves the
# requests in flight.
THROTTLED_RETRIES = 8

Entry = tuple  # (key, size, etag), as the native page gives it


class _Range:
    """Keys of one contiguous part of the listing: under ``prefix``, after ``after`` (exclusive) and up to
    ``upto`` (inclusive; None: to the end of the prefix). Listed by its own chain of pages."""

    __slots__ = (
        "after",
        "density",
        "end",
        "failure",
        "finished",
        "flat",
        "floor",
        "in_flight",
        "items",
        "listed",
        "may_split",
        "plain",
        "position",
        "prefix",
        "skip",
        "span",
        "successor",
        "throttled",
        "token",
        "upto",
        "urgent",
    )

    def __init__(
        self,
        prefix: str,
        after: Optional[str],
        upto: Optional[str],
        *,
        flat: bool = False,
        floor: Optional[str] = None,
        end: Optional[str] = None,
    ) -> None:
        self.prefix = prefix
        self.after = after
        self.upto = upto
        self.token: Optional[str] = None  # the next page's continuation token
        self.position = after if after is not None else prefix  # the last key or folder listed
        # What it yields, in order: lists of entries and the ranges of its folders.
        self.items: deque[Union[list, _Range]] = deque()
        self.in_flight = False
        self.finished = False  # no page left to ask for
        self.failure: Optional[BaseException] = None
        self.successor: Optional[_Range] = None  # the range split off after it
        # (keys, width) its pages covered, width measured by the listing's alphabet: how dense it is.
        self.density: Optional[tuple[int, int]] = None
        self.listed = False  # among the ranges that splitting considers
        # Split at most once per page it brought: a range split off knows nothing of its keys yet, and is not
        # cut again before its own first page tells how dense it is. Splits then double per round trip
        # where keys are, instead of being spent on guesses where there may be none.
        self.may_split = False
        self.plain = False  # asked for without the delimiter (the listing's first page)
        # Asked for without the delimiter, keys only: consecutive folders of a range, or the rest of one.
        self.flat = flat
        self.floor = floor  # keys before it, which its first page may hold, are another range's
        self.end = end  # keys from it on are another range's (exclusive, unlike upto)
        self.skip: Optional[str] = None  # a folder of it that another range lists
        # The reader waits for it (or it was cut from such a range): asked for even when pages ahead wait.
        self.urgent = False
        self.throttled = 0  # pages of it that S3 refused with SlowDown beyond the CRT's retries
        # (alphabet version, position, upto, low, high): the numbers of where it stands and where it ends,
        # kept while none of the three changes (splitting looks at every open range each time it is asked).
        self.span: Optional[tuple[int, str, Optional[str], int, int]] = None


class _Alphabet:
    """The characters seen in keys, for measuring how far apart two keys are (see :meth:`number`)."""

    def __init__(self) -> None:
        self.characters: list[str] = []
        self._seen: set[str] = set()
        self.version = 0  # changes with the characters, and so with every number

    def learn(self, text: str) -> None:
        new = set(text) - self._seen
        if new:
            self._seen |= new
            self.characters = sorted(self._seen - {DELIMITER})
            self.version += 1

    def number(self, text: str) -> int:
        """``text`` as a number in base len(characters) + 1 over SPLIT_DIGITS digits, increasing with the
        text's order as far as those digits and characters tell (0 stands for the end of the text)."""
        base = len(self.characters) + 1
        value = 0
        for index in range(SPLIT_DIGITS):
            # A character not seen ranks with the last seen one below it.
            digit = bisect.bisect_right(self.characters, text[index]) if index < len(text) else 0
            value = value * base + digit
        return value

    def text(self, number: int) -> str:
        """The inverse of :meth:`number` (trailing zero digits dropped)."""
        base = len(self.characters) + 1
        digits = []
        for _ in range(SPLIT_DIGITS):
            number, digit = divmod(number, base)
            digits.append(digit)
        characters = []
        for digit in reversed(digits):
            if digit == 0:
                break
            characters.append(self.characters[digit - 1])
        return "".join(characters)

    @property
    def top(self) -> int:
        """The number past every text made of the characters seen."""
        return (len(self.characters) + 1) ** SPLIT_DIGITS


class StartAfterRefused(Exception):
    """The server refused a StartAfter (S3 Express directory buckets do): list in one stream instead."""


class ParallelListing:
    """Iterates ``(key, size, etag)`` of every key under ``location``, in S3's order (see the module doc);
    with ``details``, ``(key, size, etag, LastModified, StorageClass)``.

    Args:
        native: the native client.
        location: the bucket and prefix.
        max_requests: requests in flight at most (``S3Config.max_list_requests``).
        page_size: keys per page [S3's 1,000].
        timeout_ms: ``request_timeout_ms``.
        failure_of: turns what a page request raised into the S3Error to raise (see ``S3Client``).
        details: parse each object's LastModified and StorageClass too.
    """

    def __init__(
        self,
        native: _core.S3Client,
        location: S3Url,
        *,
        max_requests: int,
        page_size: Optional[int],
        timeout_ms: int,
        failure_of: Callable[[Exception], BaseException],
        details: bool = False,
    ) -> None:
        self.native = native
        self.details = details
        self.location = location
        self.allowed_requests = max(1, max_requests)
        self.max_requests = self.allowed_requests  # lower while S3 answers SlowDown
        self.fewest_requests = self.max_requests  # the lowest it went, for tests and logs
        self.page_size = page_size or 0
        self.page_keys = page_size or DEFAULT_PAGE_KEYS
        self.timeout_ms = timeout_ms
        self.failure_of = failure_of
        self.queue = _core.CompletionQueue()
        self.alphabet = _Alphabet()
        self.buffered = 0  # keys in ranges' items, not yet yielded
        self._tags = itertools.count()
        self._in_flight: dict[int, tuple[_Range, Any, bool]] = {}  # tag -> (range, request, with start-after)
        self._waiting: list[tuple[str, int, _Range]] = []  # ranges to ask next, earliest first
        self._open: list[_Range] = []  # ranges whose chains go on (split candidates)
        self.requests = 0  # sent, for tests and logs
        self.splits = 0
        self.peak_in_flight = 0
        self.pages = 0
        self.last_yielded: Optional[str] = None  # the reader's progress (a fallback resumes after it)
        # Folders listed together per range (see _group_size); 1 until the first page shows small folders.
        self.folders_per_group = 1
        self.groups = 0  # ranges of several folders, for tests and logs

    # -- iteration ---------------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Entry]:
        return itertools.chain.from_iterable(self.batches())

    def batches(self) -> Iterator[list]:
        """The same entries, a page's worth at a time (no Python frame per key on the way)."""
        root = _Range(self.location.key, None, None)
        root.plain = True
        try:
            try:
                yield from self._drain(root, first=True)
            except StartAfterRefused:
                logger.warning(
                    "s3://%s/%s: the server refused ListObjectsV2's StartAfter (as S3 Express directory "
                    "buckets do); listing in one stream of pages instead of %d in parallel",
                    self.location.bucket,
                    self.location.key,
                    self.max_requests,
                )
                self._cancel_all()
                yield from self._one_stream()
        finally:
            self._cancel_all()

    def _drain(self, first_range: _Range, first: bool = False) -> Iterator[list]:
        current: Optional[_Range] = first_range
        if first:
            self._send(first_range)
        while current is not None:
            while True:
                if current.items:
                    item = current.items.popleft()
                    if isinstance(item, _Range):
                        yield from self._drain(item)
                    else:
                        self.buffered -= len(item)
                        self.last_yielded = item[-1][0]  # handed over: a fallback resumes after it
                        yield item
                        # Pages that came while the reader worked are taken in, and their ranges asked for
                        # again, before the next batch, rather than when the reader runs dry. Measured here it
                        # changed nothing (the native receive path bounded pages per second; docs/listing.md),
                        # but a reader working through a backlog no longer holds the requests back.
                        self._pump(wait=False)
                    continue
                if current.failure is not None:
                    raise self._stopped(current.failure)
                if current.finished and not current.in_flight:
                    break
                current.urgent = True
                self._pump()
            current = current.successor

    def _stopped(self, failure: BaseException) -> BaseException:
        """The failure, saying where the listing stopped: never taken for a complete listing."""
        if isinstance(failure, S3Error) and failure.args:
            where = (
                f"after s3://{self.location.bucket}/{self.last_yielded}: every key before it was listed"
                if self.last_yielded is not None
                else "before its first key"
            )
            failure.args = (f"{str(failure.args[0]).rstrip('.')} (the listing stopped {where}, none after).",)
        return failure

    def _one_stream(self) -> Iterator[list]:
        # After a refused StartAfter: from the start, skipping what was yielded; each page asked for as soon
        # as its token is known, while the page before it is read.
        request = self._start_plain_page("")
        while True:
            objects, _folders, next_token = self._result(request)
            if next_token is not None:
                request = self._start_plain_page(next_token)
            last = self.last_yielded
            if last is not None and objects and objects[0][0] <= last:
                objects = [entry for entry in objects if entry[0] > last]
            if objects:
                self.last_yielded = objects[-1][0]
                yield objects
            if next_token is None:
                return

    def _start_plain_page(self, token: str) -> Any:
        return self._start_page(next(self._tags), self.location.key, "", token, "")

    def _start_page(self, tag: int, prefix: str, delimiter: str, token: str, start_after: str) -> Any:
        """One ListObjectsV2 request, its answer announced on the queue under ``tag``."""
        self.requests += 1
        return self.native.start_list_objects_v2(
            self.location.bucket,
            queue=self.queue,
            tag=tag,
            prefix=prefix,
            delimiter=delimiter,
            continuation_token=token,
            start_after=start_after,
            max_keys=self.page_size,
            timeout_ms=self.timeout_ms,
            details=self.details,
        )

    # -- requests ----------------------------------------------------------------------------------------

    def _result(self, request: Any) -> tuple[list, list, Optional[str]]:
        try:
            return request.result()
        except (S3Error, ValueError) as error:
            raise self.failure_of(error) from None

    def _send(self, chain: _Range) -> None:
        tag = next(self._tags)
        delimiter = "" if chain.plain or chain.flat else DELIMITER
        start_after = chain.after if chain.token is None and chain.after is not None else ""
        request = self._start_page(tag, chain.prefix, delimiter, chain.token or "", start_after)
        self._in_flight[tag] = (chain, request, bool(start_after))
        chain.in_flight = True
        self.peak_in_flight = max(self.peak_in_flight, len(self._in_flight))

    def _wait_for(self, chain: _Range) -> None:
        heapq.heappush(self._waiting, (chain.position, next(self._tags), chain))

    def _pump(self, wait: bool = True) -> None:
        """Sends what may be sent, then (if ``wait``) waits for one answer, and takes in every answer that
        has come."""
        self._send_waiting()
        if not self._in_flight:
            if not wait:
                return
            raise RuntimeError("ListObjectsV2 in parallel: nothing in flight while a range waits (a bug)")
        tag = self.queue.pop((self.timeout_ms or 2**31 - 1) if wait else 0)
        if tag is None:
            if not wait:
                return
            # Nothing answered in time: the earliest request's own wait fails it with the typed timeout.
            tag = min(self._in_flight)
        while tag is not None:
            if tag in self._in_flight:
                self._take(tag)
            tag = self.queue.pop(0)
        self._send_waiting()

    def _send_waiting(self) -> None:
        # Long ranges are cut even while others wait their turn (a folder holding most of the keys would
        # otherwise be listed one page at a time until every folder was asked for), as many as free slots.
        while len(self._in_flight) + len(self._waiting) < self.max_requests and self._split():
            pass
        # The reader is behind: a few requests, for the earliest ranges (what it waits for comes first).
        limit = BEHIND_REQUESTS if self.buffered > BUFFERED_KEYS else self.max_requests
        while len(self._in_flight) < min(limit, self.max_requests) and self._waiting:
            chain = heapq.heappop(self._waiting)[2]
            if not (chain.finished or chain.failure is not None or chain.in_flight):
                self._send(chain)

    def _take(self, tag: int) -> None:
        chain, request, with_start_after = self._in_flight.pop(tag)
        chain.in_flight = False
        try:
            objects, folders, token = request.result()
        except (S3Error, ValueError) as error:
            status = error.http_status if isinstance(error, S3Error) else None
            if with_start_after and status == 400:
                raise StartAfterRefused() from error
            slow_down = status == 503 or getattr(error, "crt_error", "") == "AWS_ERROR_S3_SLOW_DOWN"
            if slow_down and chain.throttled < THROTTLED_RETRIES:
                # SlowDown after the CRT's retries: half the requests at once, and this page again. Each
                # page that comes allows one more (as TCP backs off and recovers).
                chain.throttled += 1
                self.max_requests = max(1, self.max_requests // 2)
                self.fewest_requests = min(self.fewest_requests, self.max_requests)
                logger.info("ListObjectsV2 throttled (SlowDown): %d requests in flight", self.max_requests)
                self._wait_for(chain)
                return
            chain.failure = self.failure_of(error)
            chain.finished = True
            return
        chain.throttled = 0
        if self.max_requests < self.allowed_requests:
            self.max_requests += 1
        self._absorb(chain, objects, folders, token)

    def _absorb(self, chain: _Range, objects: list, folders: list, token: Optional[str]) -> None:
        """Takes one page into its range: keys and folders in order, up to the range's end."""
        cut = len(chain.prefix)
        if self.pages < ALPHABET_PAGES:
            for entry in objects:
                self.alphabet.learn(entry[0][cut:])
        elif objects:
            self.alphabet.learn(objects[0][0][cut:])
            self.alphabet.learn(objects[-1][0][cut:])
        self.pages += 1
        if chain.floor is not None and objects and objects[0][0] < chain.floor:
            objects = [entry for entry in objects if entry[0] >= chain.floor]
        upto, end = chain.upto, chain.end
        if upto is not None or end is not None:
            # What lies beyond the range's end belongs to the range after it, which lists it itself.
            kept = len(objects)
            while kept and (
                (upto is not None and objects[kept - 1][0] > upto)
                or (end is not None and objects[kept - 1][0] >= end)
            ):
                kept -= 1
            kept_folders = len(folders)
            if upto is not None:
                kept_folders = bisect.bisect_right(folders, upto)
            if end is not None:
                kept_folders = min(kept_folders, bisect.bisect_left(folders, end))
            if kept < len(objects) or kept_folders < len(folders):
                token = None
            objects, folders = objects[:kept], folders[:kept_folders]
        # Where this page's keys started: after the range's last one, or at its own first for a first page.
        before = chain.position if chain.density is not None or chain.after is not None else None
        batch: list = objects  # a page without folders is handed over as it came (most pages)
        if folders:
            group_size = self._group_size(len(folders))
            batch = []
            run: list[str] = []  # consecutive folders (no key between them)
            names = iter(folders)
            folder = next(names, None)
            for entry in objects:
                while folder is not None and folder < entry[0]:
                    run.append(folder)
                    folder = next(names, None)
                if run:
                    batch = self._add_folders(chain, batch, run, group_size)
                    run = []
                batch.append(entry)
            while folder is not None:
                run.append(folder)
                folder = next(names, None)
            if run:
                batch = self._add_folders(chain, batch, run, group_size)
        if batch:
            chain.items.append(batch)
            self.buffered += len(batch)
        last = max(objects[-1][0] if objects else "", folders[-1] if folders else "")
        if last:
            chain.position = last
            first = (
                before
                if before is not None
                else min([*(objects[0][:1] if objects else ()), *folders[:1], last])
            )
            low = self.alphabet.number(first[cut:]) if first.startswith(chain.prefix) else 0
            width = max(1, self.alphabet.number(last[cut:]) - low)
            keys, covered = chain.density or (0, 0)
            chain.density = (keys + len(objects) + len(folders), covered + width)
        if token is None:
            chain.finished = True
            return
        if chain.plain:
            self._learn_folder_size(chain, objects)
            self._continue_after_first_page(chain)
            return
        if chain.flat and self._hand_over_folder(chain, objects):
            return
        chain.token = token
        chain.may_split = True
        self._wait_for(chain)
        if not chain.listed:
            chain.listed = True
            self._open.append(chain)

    def _continue_after_first_page(self, first: _Range) -> None:
        """The first page came without a delimiter; the rest is listed with one, in ranges that go on after
        its last key: the rest of the folder that key is in, then the rest of each folder around that one,
        innermost first (its token would go on without a delimiter, and whether S3 names a folder again
        when StartAfter falls inside it is not something to rely on)."""
        last = first.position
        first.plain = False
        first.finished = True
        folders = []
        end = last.find(DELIMITER, len(first.prefix))
        while end != -1:
            folders.append(last[: end + 1])
            end = last.find(DELIMITER, end + 1)
        ranges = []
        after, inner = last, None
        for folder in reversed([first.prefix, *folders]):
            following = _Range(folder, after, None)
            following.skip = inner
            ranges.append(following)
            after = inner = folder
        self._follow_with(first, ranges)

    def _follow_with(self, chain: _Range, ranges: list[_Range]) -> None:
        """Puts ``ranges`` (in key order) between ``chain`` and the range after it, and asks for them."""
        ranges[-1].successor = chain.successor
        for earlier, later in zip(ranges, ranges[1:]):
            earlier.successor = later
        chain.successor = ranges[0]
        for following in ranges:
            self._wait_for(following)

    def _add_folders(self, chain: _Range, batch: list, run: list[str], group_size: int) -> list:
        """Puts the ranges of ``run``, consecutive folders of ``chain``, after ``batch`` in its items."""
        if batch:
            chain.items.append(batch)
            self.buffered += len(batch)
        if chain.skip in run:  # listed by the range before (a server may name it when StartAfter is in it)
            run = [folder for folder in run if folder != chain.skip]
        for start in range(0, len(run), group_size):
            group = run[start : start + group_size]
            if len(group) == 1:
                child = _Range(group[0], None, None)
            else:
                # Every key from the first folder's to the end of the last one's is in these folders: nothing
                # came between them. StartAfter the first one's name (a key of that name, and those sorting
                # between it and the folder, belong before it: dropped as they come).
                child = _Range(
                    chain.prefix, group[0][:-1], None, flat=True, floor=group[0], end=_past_folder(group[-1])
                )
                self.groups += 1
            chain.items.append(child)
            self._wait_for(child)
        return []

    def _learn_folder_size(self, first: _Range, objects: list) -> None:
        """From the first page (a full one, without the delimiter): how many keys a folder holds, counted in
        the innermost folders (the fan-out names folders level by level; where a folder holds folders, its
        range of several is cut short, see _hand_over_folder)."""
        if not objects:
            return
        cut = len(first.prefix)
        folders = [
            entry[0][: entry[0].rindex(DELIMITER)] if DELIMITER in entry[0][cut:] else None
            for entry in objects
        ]
        last = folders[-1]
        whole = [name for name in folders if name is not None and name != last]  # the last one may go on
        if whole:
            self.folders_per_group = max(1, self.page_keys * len(set(whole)) // len(whole))

    def _group_size(self, folders: int) -> int:
        """Folders per range for a page naming ``folders`` folders: about a page's worth of keys, and never
        fewer ranges than requests to send."""
        return max(1, min(self.folders_per_group, -(-folders // self.max_requests)))

    def _hand_over_folder(self, chain: _Range, objects: list) -> bool:
        """A page of a flat range that lies within one folder (larger than its neighbours): the rest of that
        folder becomes a flat range of its own, which splits within the folder, followed by the rest of
        ``chain``. True if it did (``chain`` then ends here)."""
        if not objects:
            return False
        cut = len(chain.prefix)
        last = objects[-1][0]
        slash = last.find(DELIMITER, cut)
        if slash == -1:
            return False
        folder = last[: slash + 1]
        if not objects[0][0].startswith(folder):
            return False
        chain.finished = True
        ranges = [_Range(folder, last, None, flat=True)]  # the rest of the folder
        after_folder = _past_folder(folder)
        if (chain.upto is None or after_folder <= chain.upto) and (
            chain.end is None or after_folder < chain.end
        ):  # the rest of the chain
            ranges.append(
                _Range(
                    chain.prefix,
                    folder + LAST_CHARACTER,
                    chain.upto,
                    flat=True,
                    floor=after_folder,
                    end=chain.end,
                )
            )
        for following in ranges:
            following.urgent = chain.urgent
        self._follow_with(chain, ranges)
        return True

    # -- splitting ---------------------------------------------------------------------------------------

    def _split(self) -> bool:
        """Cuts the range that looks longest; False if none looks longer than SPLIT_MIN_PAGES pages.

        A range with an end is cut in two halfway. A range that goes to the end of its prefix, where nothing
        tells how far its keys go, is cut at points a page's width, then 2, 4, 8... page widths past where
        it stands (as far as the free request slots allow): where its keys end, the ranges past that cost
        one request each, a few whatever the key space, where halving towards the end of the alphabet
        would spend one round trip per halving.
        """
        alphabet = self.alphabet
        if not alphabet.characters:
            return False
        best: Optional[tuple[float, int, int, _Range]] = None
        still_open = []
        for chain in self._open:
            if chain.finished or chain.failure is not None:
                chain.listed = False
                continue
            still_open.append(chain)
            if chain.density is None or not chain.may_split:
                continue
            low, high = self._span(chain)
            keys, covered = chain.density
            remaining = keys * (high - low) / covered
            if remaining < SPLIT_MIN_PAGES * self.page_keys:
                continue
            # The earliest long range first: the reader needs it before the others.
            if best is None or (not chain.urgent, chain.position) < (not best[3].urgent, best[3].position):
                best = (remaining, low, high, chain)
        self._open = still_open
        if best is None:
            return False
        _remaining, low, high, chain = best
        keys, covered = chain.density  # type: ignore[misc]
        if chain.upto is not None or chain.end is not None:
            numbers = [(low + high) // 2]
        else:
            page_width = max(1, covered * self.page_keys // max(1, keys))
            slots = max(1, self.max_requests - len(self._in_flight))
            numbers = []
            step = page_width
            while len(numbers) < slots and low + step < high:
                numbers.append(low + step)
                step *= 2
        points: list[str] = []
        for number in numbers:
            point = chain.prefix + alphabet.text(number)
            if (
                point > (points[-1] if points else chain.position)
                and (chain.upto is None or point < chain.upto)
                and (chain.end is None or point < chain.end)
            ):
                points.append(point)
        if not points:
            return False
        chain.may_split = False
        earlier = chain
        for point, later_point in zip(points, [*points[1:], chain.upto]):
            following = _Range(chain.prefix, point, later_point, flat=chain.flat, end=chain.end)
            following.successor = earlier.successor
            following.listed = True
            following.urgent = chain.urgent
            earlier.successor = following
            earlier.upto = point
            self._open.append(following)
            self._wait_for(following)
            earlier = following
        self.splits += len(points)
        return True

    def _span(self, chain: _Range) -> tuple[int, int]:
        """The alphabet's numbers of where ``chain`` stands and where it ends."""
        alphabet, span = self.alphabet, chain.span
        if span is not None and span[:3] == (alphabet.version, chain.position, chain.upto):
            return span[3], span[4]
        cut = len(chain.prefix)
        low = alphabet.number(chain.position[cut:]) if chain.position.startswith(chain.prefix) else 0
        if chain.upto is not None:
            high = alphabet.number(chain.upto[cut:])
        elif chain.end is not None:
            high = alphabet.number(chain.end[cut:])
        else:
            high = alphabet.top
        chain.span = (alphabet.version, chain.position, chain.upto, low, high)
        return low, high

    def _cancel_all(self) -> None:
        for _chain, request, _with in self._in_flight.values():
            request.cancel()
        self._in_flight.clear()


def _past_folder(folder: str) -> str:
    """The least string after every key in ``folder`` (which ends with the delimiter)."""
    return folder[:-1] + chr(ord(DELIMITER) + 1)
