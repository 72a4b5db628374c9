"""Generating the datasets that need third-party formats: JPEG images (Pillow) and the random-access files
(a Parquet table with pyarrow, a zip archive). Deterministic: the same parameters give the same bytes with
the same library versions, and every manifest carries the digest of what was written."""

from __future__ import annotations

import io
import random
import zipfile
import zlib
from pathlib import Path
from typing import Callable

from benchmarks.datasets import Manifest, crc_sum

PARQUET_KEY = "random/table.parquet"
ZIP_KEY = "random/archive.zip"


def write_images(directory: Path, parameters: dict, progress: Callable[[int], None]) -> Manifest:
    """Smooth colour fields with grain: JPEG sizes like photographs' (about 118 kB at 640x480, quality 90);
    pure noise would be larger and flat colour tiny."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(5)
    width, height = parameters["width"], parameters["height"]
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    keys, sizes, crcs = [], [], []
    for index in range(parameters["count"]):
        phases = rng.uniform(0, 2 * np.pi, size=(3, 2))
        frequencies = rng.uniform(0.005, 0.05, size=(3, 2))
        channels = [
            127 + 100 * np.sin(x * fx + px) * np.cos(y * fy + py)
            for (fx, fy), (px, py) in zip(frequencies, phases)
        ]
        pixels = np.stack(channels, axis=-1) + rng.normal(0, 12, size=(height, width, 3))
        image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=parameters["quality"])
        data = buffer.getvalue()
        key = f"images/img-{index:05d}.jpg"
        (directory / key).parent.mkdir(parents=True, exist_ok=True)
        (directory / key).write_bytes(data)
        keys.append(key)
        sizes.append(len(data))
        crcs.append(zlib.crc32(data))
        progress(1)
    return Manifest("images", parameters, keys, sizes, crc_sum(crcs))


def parquet_column_digest(table) -> int:  # type: ignore[no-untyped-def]
    """crc32 of a one-column float64 table's values, however the reader chunked them."""
    return zlib.crc32(table.column(0).combine_chunks().to_numpy(zero_copy_only=False).tobytes())


def write_random_access_files(directory: Path, parameters: dict, progress: Callable[[int], None]) -> Manifest:
    """A Parquet table of float64 columns in a few row groups, and a zip of stored (uncompressed) members.

    The workload reads one column (a few ranges of the file) and a few members (the central directory at
    the end, then each member's header and data): the Manifest's ``extra`` names what is read and holds
    the digest of exactly that content."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    (directory / PARQUET_KEY).parent.mkdir(parents=True, exist_ok=True)
    columns = parameters["parquet_columns"]
    rows = parameters["parquet_bytes"] // (8 * columns)
    rng = np.random.default_rng(6)
    table = pa.table({f"c{number:02d}": rng.standard_normal(rows) for number in range(columns)})
    pq.write_table(
        table,
        directory / PARQUET_KEY,
        row_group_size=max(1, rows // parameters["parquet_row_groups"]),
        compression="none",  # random doubles do not compress; the file is as large as asked
    )
    picked_column = f"c{columns // 2:02d}"
    parquet_digest = parquet_column_digest(table.select([picked_column]))
    progress(1)

    member_bytes = parameters["zip_member_bytes"]
    count = max(1, parameters["zip_bytes"] // member_bytes)
    picker = random.Random(7)
    picked = sorted(picker.sample(range(count), min(parameters["zip_members_picked"], count)))
    names = [f"member-{index:05d}.bin" for index in range(count)]
    member_crcs = []
    with zipfile.ZipFile(directory / ZIP_KEY, "w", compression=zipfile.ZIP_STORED) as archive:
        for index, name in enumerate(names):
            data = picker.randbytes(member_bytes)
            archive.writestr(name, data)
            if index in picked:
                member_crcs.append(zlib.crc32(data))
    progress(1)

    keys = [PARQUET_KEY, ZIP_KEY]
    extra = {
        "parquet": {"key": PARQUET_KEY, "columns": [picked_column], "rows": rows, "digest": parquet_digest},
        "zip": {"key": ZIP_KEY, "members": [names[i] for i in picked], "digest": crc_sum(member_crcs)},
    }
    sizes = [(directory / key).stat().st_size for key in keys]
    return Manifest("random", parameters, keys, sizes, 0, extra=extra)
