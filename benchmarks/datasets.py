"""The benchmark datasets, generated once on local disk as ``<root>/<bucket>/<key>`` for the endpoint.

Each dataset lives under its own prefix of one bucket and is described by a manifest (keys, sizes and a
content digest), so every client's result can be checked against it. Generation is deterministic and cached:
a dataset whose manifest matches the requested parameters is reused.
"""

from __future__ import annotations

import json
import random
import shutil
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from tqdm import tqdm

BUCKET = "bench"
MiB = 1024 * 1024

# The announcement's text shards: 100,000 lines of ~1.6 kB (~156 MB each).
PUBLISHED_LINES_PER_SHARD = 100_000
LINE_BYTES = 1600


@dataclass(frozen=True)
class DatasetSpec:
    name: str  # also the key prefix
    parameters: dict

    @property
    def prefix(self) -> str:
        return f"{self.name}/"


@dataclass
class Manifest:
    spec_name: str
    parameters: dict
    keys: list[str]
    sizes: list[int]
    # Order-independent digest of the content: the sum of crc32 of every object (large, small) or every
    # line (text), modulo 2**64; plus the total count of lines for text.
    digest: int
    lines: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes)


def text_spec(shards: int, scale: float) -> DatasetSpec:
    return DatasetSpec(
        "text", {"shards": shards, "lines_per_shard": max(1, round(PUBLISHED_LINES_PER_SHARD * scale))}
    )


def large_spec(count: int, size_mib: int) -> DatasetSpec:
    return DatasetSpec("large", {"count": count, "size_bytes": size_mib * MiB})


def small_spec(count: int, size_kb: int) -> DatasetSpec:
    return DatasetSpec("small", {"count": count, "size_bytes": size_kb * 1000})


def huge_spec(size_mib: int) -> DatasetSpec:
    """One object read as a stream: the memory workload (the issue's 1 GiB)."""
    return DatasetSpec("huge", {"count": 1, "size_bytes": size_mib * MiB})


def listing_spec(count: int) -> DatasetSpec:
    return DatasetSpec("list", {"count": count})


def images_spec(count: int) -> DatasetSpec:
    """JPEG photographs' stand-ins: 640x480, quality 90, about 118 kB each (see benchmarks.generate)."""
    return DatasetSpec("images", {"count": count, "width": 640, "height": 480, "quality": 90})


def random_spec(parquet_size_mib: int, zip_size_mib: int) -> DatasetSpec:
    """One many-column Parquet file and one large zip, for reads that seek (see benchmarks.generate)."""
    return DatasetSpec(
        "random",
        {
            "parquet_bytes": parquet_size_mib * MiB,
            "parquet_columns": 32,
            "parquet_row_groups": 4,
            "zip_bytes": zip_size_mib * MiB,
            "zip_member_bytes": MiB,
            "zip_members_picked": 4,
        },
    )


def crc_sum(values: list[int]) -> int:
    return sum(values) % (1 << 64)


def _write_text(directory: Path, parameters: dict, progress: Callable[[int], None]) -> Manifest:
    rng = random.Random(1)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 "
    keys, sizes, crcs = [], [], []
    lines_total = 0
    for shard in range(parameters["shards"]):
        key = f"text/shard-{shard:05d}.txt"
        path = directory / key
        path.parent.mkdir(parents=True, exist_ok=True)
        # A few distinct line bodies with a unique numbered head: realistic length, cheap to generate.
        bodies = ["".join(rng.choice(alphabet) for _ in range(LINE_BYTES - 24)) for _ in range(64)]
        with open(path, "wb") as handle:
            for number in range(parameters["lines_per_shard"]):
                line = f"{shard:05d}:{number:09d}|{bodies[number % 64]}".encode()
                crcs.append(zlib.crc32(line))
                handle.write(line + b"\n")
        lines_total += parameters["lines_per_shard"]
        keys.append(key)
        sizes.append(path.stat().st_size)
        progress(1)
    return Manifest("text", parameters, keys, sizes, crc_sum(crcs), lines=lines_total)


def _write_random_object(rng: random.Random, path: Path, size: int) -> int:
    """Writes `size` random bytes to `path` in 64 MiB blocks and returns their crc32.

    Blocks keep the harness small while it writes a 1 GiB object (its own peak RSS is inherited by every
    measurement process it starts), and randbytes overflows above 256 MiB. Objects up to 64 MiB are one
    block: the same bytes as before blocks existed.
    """
    block = 64 * MiB
    crc = 0
    with open(path, "wb") as file:
        for start in range(0, size, block):
            data = rng.randbytes(min(block, size - start))
            file.write(data)
            crc = zlib.crc32(data, crc)
    return crc


def _write_objects(
    prefix: str, stem: str, directory: Path, parameters: dict, progress: Callable[[int], None]
) -> Manifest:
    rng = random.Random({"large": 2, "small": 3}.get(prefix, 4))
    keys, sizes, crcs = [], [], []
    for index in range(parameters["count"]):
        key = f"{prefix}/{stem}-{index:05d}.bin"
        path = directory / key
        path.parent.mkdir(parents=True, exist_ok=True)
        crcs.append(_write_random_object(rng, path, parameters["size_bytes"]))
        keys.append(key)
        sizes.append(parameters["size_bytes"])
        progress(1)
    return Manifest(prefix, parameters, keys, sizes, crc_sum(crcs))


def _write_listing(directory: Path, parameters: dict, progress: Callable[[int], None]) -> Manifest:
    keys = []
    for index in range(parameters["count"]):
        key = f"list/d{index // 1000:04d}/k{index:07d}"
        path = directory / key
        if index % 1000 == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
        keys.append(key)
        progress(1)
    return Manifest(
        "list", parameters, keys, [1] * len(keys), crc_sum([zlib.crc32(k.encode()) for k in keys])
    )


def ensure_dataset(root: Path, spec: DatasetSpec) -> Manifest:
    """Generates the dataset under ``root/BUCKET`` unless a matching one is already there."""
    bucket_dir = root / BUCKET
    manifest_path = root / f"{spec.name}.manifest.json"
    if manifest_path.exists():
        cached = Manifest(**json.loads(manifest_path.read_text()))
        if cached.parameters == spec.parameters and all((bucket_dir / k).exists() for k in cached.keys[:5]):
            return cached
    # Objects of an earlier generation with other parameters would otherwise stay under the prefix, and a
    # client that lists it (ours in `text` and `epochs`) would read them too.
    shutil.rmtree(bucket_dir / spec.name, ignore_errors=True)
    total = spec.parameters.get("shards") or spec.parameters.get("count") or 2
    with tqdm(total=total, desc=f"generating {spec.name}", unit="obj", leave=False) as bar:
        if spec.name == "text":
            manifest = _write_text(bucket_dir, spec.parameters, bar.update)
        elif spec.name == "large":
            manifest = _write_objects("large", "obj", bucket_dir, spec.parameters, bar.update)
        elif spec.name == "small":
            manifest = _write_objects("small", "img", bucket_dir, spec.parameters, bar.update)
        elif spec.name == "huge":
            manifest = _write_objects("huge", "obj", bucket_dir, spec.parameters, bar.update)
        elif spec.name == "list":
            manifest = _write_listing(bucket_dir, spec.parameters, bar.update)
        elif spec.name == "images":
            from benchmarks.generate import write_images

            manifest = write_images(bucket_dir, spec.parameters, bar.update)
        elif spec.name == "random":
            from benchmarks.generate import write_random_access_files

            manifest = write_random_access_files(bucket_dir, spec.parameters, bar.update)
        else:
            raise ValueError(f"unknown dataset {spec.name}")
    manifest_path.write_text(json.dumps(asdict(manifest)))
    return manifest


PROBE_KEY = "probe/bandwidth-probe.bin"
PROBE_BYTES = 24 * MiB


def ensure_probe(root: Path) -> str:
    """An object big enough to measure a connection's bandwidth when checking the endpoint's profile."""
    path = root / BUCKET / PROBE_KEY
    if not path.exists() or path.stat().st_size != PROBE_BYTES:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(random.Random(4).randbytes(PROBE_BYTES))
    return PROBE_KEY


def load_manifest(root: Path, name: str) -> Manifest:
    return Manifest(**json.loads((root / f"{name}.manifest.json").read_text()))
