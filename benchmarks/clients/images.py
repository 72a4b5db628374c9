"""The `images` workload's shared parts: decoding a JPEG the way a training pipeline does, and timing a
DataLoader of decoded samples. Each adapter builds its own pipeline or dataset, in its idiomatic form, and
hands its DataLoader here.

A sample is ``(crc32 of the JPEG bytes or 0, width, height)``: small, so what the loader moves between
processes is the same for every client, and the timed work is fetching and decoding.
"""

from __future__ import annotations

import functools
import io
import zlib
from collections.abc import Iterable
from typing import IO, Any, Callable, Union

from .common import Context, Digest, Measurement, Stopwatch

Sample = tuple[int, int, int]


def decode(source: Union[IO[bytes], bytes], verify: bool = False) -> Sample:
    """``PIL.Image.open(source).convert("RGB")``: a full decode, as a transform before augmentation does.

    With ``verify``, the bytes are read first and their crc32 returned, so the untimed check run proves the
    client delivered the dataset's bytes; timed runs hand the file object (or bytes) to PIL as users do.
    """
    from PIL import Image

    crc = 0
    if verify:
        data = source if isinstance(source, (bytes, bytearray, memoryview)) else source.read()
        crc = zlib.crc32(data)
        source = io.BytesIO(data)
    elif isinstance(source, (bytes, bytearray, memoryview)):
        source = io.BytesIO(source)
    with Image.open(source) as image:
        rgb = image.convert("RGB")
    return crc, rgb.width, rgb.height


def decoder(ctx: Context) -> Callable[[Any], Sample]:
    """The decode function for this run (picklable: DataLoader workers may be spawned)."""
    return functools.partial(decode, verify=ctx.verify)


def consume_images(make_loader: Callable[[], Iterable[Sample]], ctx: Context) -> Measurement:
    """Times one pass of the DataLoader, worker start and shutdown included (as every epoch pays them).

    ``bytes`` is the JPEG bytes of the images decoded (from the dataset's manifest), for CPU per GB."""
    digest = Digest(ctx.verify)
    images = 0
    with Stopwatch() as watch:
        for crc, width, height in make_loader():
            images += 1
            if digest.enabled:
                digest.add(int(crc))
                if width <= 0 or height <= 0:
                    raise RuntimeError(f"decoded an empty image ({width}x{height})")
    total = sum(ctx.sizes) if images == len(ctx.keys) else 0
    return Measurement(images, total, watch.seconds, digest.value(), watch.cpu_seconds)
