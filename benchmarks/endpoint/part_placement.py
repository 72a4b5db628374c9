"""Copying multipart parts to their place in the object as they arrive, so Complete has little left to copy.

Clients upload parts of one size, all but the last. The first part to arrive fixes the upload's part size
``S``; a later part of that size, number ``n``, is copied (``os.copy_file_range``, in the kernel) into the
upload's assembly file at ``(n - 1) * S`` right away, and a marker ``<n>.placed`` records which version
(ETag) went where. Parts of S never overlap, so a placement can only be undone by the same part number
uploaded again, which first deletes the marker. At Complete the true offsets follow from the listed parts'
sizes; every listed part whose marker does not say "this ETag at this offset" (the short last part, parts
of another size, parts placed before a differently sized first part) is copied then, and the file is cut to
the object's size. The listed parts' ranges cover the whole object, so nothing an unlisted part left there
survives. Callers hold the upload's lock around :func:`place` and :func:`assemble`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
from pathlib import Path

ASSEMBLY = "object"
COPY_THREADS = 2
"""Parts a Complete copies at once: copy_file_range releases the GIL, so two copies use both cores."""

_PART_SIZE = "part-size"
_COPY_CHUNK_BYTES = 8 * 1024 * 1024


def place(directory: Path, number: int, part_file: Path, etag: str) -> None:
    """Copy the just-stored part ``number`` (``part_file``, whose ETag is ``etag``) to its place in the
    assembly, if its size is the upload's part size; otherwise only forget any earlier placement of it."""
    marker = directory / f"{number:05d}.placed"
    with contextlib.suppress(FileNotFoundError):
        marker.unlink()  # whatever happens below, an earlier version's placement no longer holds
    size = part_file.stat().st_size
    try:
        part_size = int((directory / _PART_SIZE).read_text())
    except FileNotFoundError:
        part_size = size
        (directory / _PART_SIZE).write_text(str(size))
    if size == 0 or size != part_size:
        return
    offset = (number - 1) * size
    assembly = os.open(directory / ASSEMBLY, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        copy_range(part_file, assembly, offset, size)
    finally:
        os.close(assembly)
    marker.write_text(f"{etag} {offset}")


def assemble(directory: Path, numbers: list[int], etags: list[str], sizes: list[int]) -> Path:
    """The assembly file of ``directory`` completed to hold parts ``numbers`` (current ETags ``etags``, sizes
    ``sizes``) one after the other, and nothing more; returns its path."""
    offsets = [sum(sizes[:index]) for index in range(len(sizes))]
    to_copy = [
        (directory / f"{number:05d}", offset, size)
        for number, etag, offset, size in zip(numbers, etags, offsets, sizes)
        if _placement(directory, number) != f"{etag} {offset}"
    ]
    path = directory / ASSEMBLY
    assembly = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with concurrent.futures.ThreadPoolExecutor(COPY_THREADS) as pool:
            for copy in [
                pool.submit(copy_range, part, assembly, offset, size) for part, offset, size in to_copy
            ]:
                copy.result()
        os.ftruncate(assembly, sum(sizes))
    finally:
        os.close(assembly)
    return path


def forget_placements(directory: Path) -> None:
    """Delete every marker: after a Complete that failed, the assembly may be cut short or gone."""
    for marker in directory.glob("*.placed"):
        with contextlib.suppress(FileNotFoundError):
            marker.unlink()


def copy_range(part_file: Path, target_fd: int, offset: int, size: int) -> None:
    """Write the ``size`` bytes of ``part_file`` at ``offset`` of open file ``target_fd``, in the kernel
    when it can. Raises OSError if the part is shorter than ``size``."""
    with open(part_file, "rb") as source:
        copied = 0
        try:
            while copied < size:
                count = os.copy_file_range(source.fileno(), target_fd, size - copied, copied, offset + copied)
                if not count:
                    raise OSError(f"{part_file} ended after {copied} of {size} bytes")
                copied += count
        except OSError:
            if copied:
                raise
            # A file system or kernel without copy_file_range: through memory.
            while copied < size:
                chunk = source.read(min(_COPY_CHUNK_BYTES, size - copied))
                if not chunk:
                    raise OSError(f"{part_file} ended after {copied} of {size} bytes") from None
                os.pwrite(target_fd, chunk, offset + copied)
                copied += len(chunk)


def _placement(directory: Path, number: int) -> str:
    try:
        return (directory / f"{number:05d}.placed").read_text()
    except FileNotFoundError:
        return ""
