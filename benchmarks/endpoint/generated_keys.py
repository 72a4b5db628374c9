"""Key spaces of millions of keys that exist only as formulas: key ``i`` is computed from ``i``.

Each shape's formula is strictly increasing in ``i`` in S3's order (UTF-8 bytes, which is Python's ``str``
order: UTF-8 keeps code point order), so the position of any string among the keys is a binary search
over ``i`` (about 24 keys computed for 10^7 keys) and a page is a slice of ``range(n)``: nothing is ever
materialised but the page being served.

Shapes (each is a bucket of the generated endpoint, named after it):

* ``tree``: ImageNet-like, ``train/n<8 digits>/n<8 digits>_<zero-padded number>.JPEG``, 1,000 keys per
  folder (10^6 keys: 1,000 folders; 10^7: 10,000).
* ``flat``: one folder of hashed-looking names, ``images/<32 hex digits>.jpg``, spread uniformly over the
  hex space (key ``i`` lies in the ``i``-th of ``n`` equal slices of it, at a pseudo-random place).
* ``skewed``: the tree's layout over 1,000 folders, but the middle folder holds 90% of the keys (the
  uneven case a folder-by-folder fan-out must split further).

``root`` (default "") is put before every key: the endpoint's tests give it characters XML and URLs
escape.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

SHAPES = ("tree", "flat", "skewed")
PLAIN_CHARACTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-~/"
TOP_FOLDERS = {"tree": "train/", "flat": "images/", "skewed": "train/"}
KEYS_PER_FOLDER = 1000
SKEWED_FOLDERS = 1000
SKEWED_SHARE = 0.9

# Synset-like folder numbers: 8 digits, increasing with the folder (n01440764 is ImageNet's first class).
_FIRST_SYNSET = 1_440_764
_LAST_SYNSET = 99_999_999
_SLICES = 1 << 64
_MASK64 = _SLICES - 1
_WEYL = 0x9E3779B97F4A7C15  # odd: i * it mod 2^64 visits every value once


class KeySpace:
    """``n`` keys in S3 order, each computed on demand. Subclasses define :meth:`key` and :meth:`keys`."""

    def __init__(self, n: int, root: str) -> None:
        if n < 0:
            raise ValueError(f"a key space cannot hold {n} keys")
        self.n = n
        self.root = root
        # Whether every key is made of URL-safe characters that XML needs no escape for: the generated
        # parts are, so it depends on the root alone.
        self.plain = set(root) <= set(PLAIN_CHARACTERS)

    def __len__(self) -> int:
        return self.n

    def key(self, i: int) -> str:
        raise NotImplementedError

    def keys(self, start: int, stop: int) -> list[str]:
        """Keys ``start`` to ``stop - 1`` (a page's worth at most)."""
        return [self.key(i) for i in range(start, stop)]

    def first_at_or_after(self, marker: str) -> int:
        """The position of the first key >= ``marker`` (``len(self)`` when there is none)."""
        low, high = 0, self.n
        while low < high:
            middle = (low + high) // 2
            if self.key(middle) < marker:
                low = middle + 1
            else:
                high = middle
        return low


class FolderKeys(KeySpace):
    """Keys in folders: ``<root><top>n<synset>/n<synset>_<number>.JPEG``; ``folder_sizes`` keys in each."""

    def __init__(self, folder_sizes: Sequence[int], root: str = "", top: str = "train/") -> None:
        super().__init__(sum(folder_sizes), root)
        self.starts = [0]
        for size in folder_sizes:
            self.starts.append(self.starts[-1] + size)
        folders = len(folder_sizes)
        step = max(1, (_LAST_SYNSET - _FIRST_SYNSET) // max(1, folders))
        self._folder_prefixes = [
            f"{root}{top}n{_FIRST_SYNSET + f * step:08d}/n{_FIRST_SYNSET + f * step:08d}_"
            for f in range(folders)
        ]
        self._width = len(str(max(folder_sizes, default=1)))

    def key(self, i: int) -> str:
        if not 0 <= i < self.n:
            raise IndexError(i)
        folder = bisect.bisect_right(self.starts, i) - 1
        return f"{self._folder_prefixes[folder]}{i - self.starts[folder]:0{self._width}d}.JPEG"

    def keys(self, start: int, stop: int) -> list[str]:
        out: list[str] = []
        width = self._width
        while start < stop:
            folder = bisect.bisect_right(self.starts, start) - 1
            end = min(stop, self.starts[folder + 1])
            head = self._folder_prefixes[folder].replace("%", "%%")  # a root may hold "%"
            template, base = f"{head}%0{width}d.JPEG", self.starts[folder]
            out += map(template.__mod__, range(start - base, end - base))  # ~40% less CPU than f-strings
            start = end
        return out


class FlatKeys(KeySpace):
    """``<root>images/<32 hex>.jpg``: 16 hex digits that place key ``i`` at the start of the ``i``-th of ``n``
    equal slices of the 64-bit space (strictly increasing, uniform over it), then 16 pseudo-random ones, so
    the names look hashed and spread over the hex space, yet increase with ``i``."""

    def __init__(self, n: int, root: str = "", top: str = "images/") -> None:
        super().__init__(n, root)
        if n > _SLICES:
            raise ValueError(f"a flat key space holds at most 2^64 keys, not {n}")
        self._head = f"{root}{top}"
        self._slice = _SLICES // max(1, n)

    def key(self, i: int) -> str:
        if not 0 <= i < self.n:
            raise IndexError(i)
        mixed = ((i + 1) * _WEYL) & _MASK64
        return f"{self._head}{i * self._slice:016x}{mixed ^ (mixed >> 29):016x}.jpg"

    def keys(self, start: int, stop: int) -> list[str]:
        # The whole page at once with numpy (a quarter of the CPU of a Python loop over its keys, and the
        # endpoint shares the client's cores): the numbers as big-endian 64-bit words, their hex digits laid
        # into rows of head + 32 digits + ".jpg" + a line break, decoded and split once.
        if "\n" in self._head:  # the line breaks would not separate the keys
            return super().keys(start, stop)
        index = np.arange(start, stop, dtype=np.uint64)
        words = np.empty((stop - start, 2), dtype=">u8")
        with np.errstate(over="ignore"):  # the Weyl step is modulo 2^64 on purpose
            words[:, 0] = index * np.uint64(self._slice)
            mixed = (index + np.uint64(1)) * np.uint64(_WEYL)
            words[:, 1] = mixed ^ (mixed >> np.uint64(29))
        digits = np.frombuffer(words.tobytes().hex().encode("ascii"), dtype=np.uint8).reshape(-1, 32)
        head = self._head.encode("utf-8", "surrogateescape")
        rows = np.empty((stop - start, len(head) + 37), dtype=np.uint8)
        rows[:, : len(head)] = np.frombuffer(head, dtype=np.uint8)
        rows[:, len(head) : len(head) + 32] = digits
        rows[:, len(head) + 32 :] = np.frombuffer(b".jpg\n", dtype=np.uint8)
        return rows.tobytes().decode("utf-8", "surrogateescape").split("\n")[:-1]


def key_space(shape: str, n: int, root: str = "") -> KeySpace:
    """The ``shape`` (see :data:`SHAPES`) over ``n`` keys, each starting with ``root``."""
    if shape == "tree":
        folders, last = divmod(n, KEYS_PER_FOLDER)
        sizes = [KEYS_PER_FOLDER] * folders + ([last] if last else [])
        return FolderKeys(sizes, root, TOP_FOLDERS[shape])
    if shape == "flat":
        return FlatKeys(n, root, TOP_FOLDERS[shape])
    if shape == "skewed":
        folders = min(SKEWED_FOLDERS, n)
        big = round(n * SKEWED_SHARE) if folders > 1 else n
        rest, extra = divmod(n - big, max(1, folders - 1))
        sizes = [rest + (1 if f < extra else 0) for f in range(folders - 1)]
        sizes.insert(folders // 2, big)
        return FolderKeys([size for size in sizes if size] if folders else [], root, TOP_FOLDERS[shape])
    raise ValueError(f"unknown key shape {shape!r}; expected one of {SHAPES}")
