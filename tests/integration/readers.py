"""The readers users hand streams to, each as a function of (url, file object) -> a digest of what it decoded.

Importable by DataLoader workers under spawn. The same function run on ``io.BytesIO(data)`` (what the
original loader yielded) gives the expected digest; the tests also check the decoded content itself.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import tarfile
import zipfile
from typing import IO, Any

import numpy as np
import torch

PARQUET_COLUMN = "c3"


def parquet_table(columns: int, rows: int, seed: int) -> bytes:
    """A Parquet file of float64 columns c0, c1, ... (one row group)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    table = pa.table({f"c{i}": rng.standard_normal(rows) for i in range(columns)})
    out = io.BytesIO()
    pq.write_table(table, out, compression="none")
    return out.getvalue()


def digest(*parts: Any) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, (bytes, bytearray, memoryview)) else repr(part).encode())
    return h.hexdigest()


def decode_image(stream: IO[bytes]) -> str:
    from PIL import Image

    with Image.open(stream) as image:
        pixels = np.asarray(image.convert("RGB"))
    return digest(pixels.shape, pixels.tobytes())


def decode_torch(stream: IO[bytes]) -> str:
    state = torch.load(stream, weights_only=True)
    return digest(*[(name, tensor.shape, tensor.numpy().tobytes()) for name, tensor in sorted(state.items())])


def decode_npy(stream: IO[bytes]) -> str:
    array = np.load(stream)
    return digest(array.shape, array.dtype.str, array.tobytes())


def decode_npz(stream: IO[bytes]) -> str:
    with np.load(stream) as archive:
        return digest(*[(name, archive[name].tobytes()) for name in sorted(archive.files)])


def decode_zip(stream: IO[bytes]) -> str:
    with zipfile.ZipFile(stream) as archive:
        return digest(*[(name, archive.read(name)) for name in sorted(archive.namelist())])


def tar_members(stream: IO[bytes], mode: str) -> str:
    parts = []
    with tarfile.open(fileobj=stream, mode=mode) as archive:
        for member in archive:  # in archive order: what streaming mode ("r|*") allows
            extracted = archive.extractfile(member)
            parts.append((member.name, extracted.read() if extracted else b""))
    return digest(*sorted(parts))


def decode_csv(stream: IO[bytes]) -> str:
    text = io.TextIOWrapper(stream, encoding="utf-8", newline="")
    rows = list(csv.reader(text))
    text.detach()  # leave the stream to its owner
    return digest(rows)


def decode_parquet_column(stream: IO[bytes]) -> str:
    import pyarrow.parquet as pq

    column = pq.ParquetFile(stream).read(columns=[PARQUET_COLUMN]).column(0).to_numpy()
    return digest(column.dtype.str, column.tobytes())


def read_twice(stream: IO[bytes]) -> str:
    first = stream.read()
    stream.seek(0)
    second = stream.read()
    assert first == second, "a second read after seek(0) differs"
    return digest(first)


DECODERS = {
    ".jpg": decode_image,
    ".png": decode_image,
    ".pt": decode_torch,
    ".npy": decode_npy,
    ".npz": decode_npz,
    ".zip": decode_zip,
    ".tar": lambda s: tar_members(s, "r:"),
    ".tar.any": lambda s: tar_members(s, "r:*"),
    ".tar.gz": lambda s: tar_members(s, "r:gz"),
    ".tar.stream": lambda s: tar_members(s, "r|*"),
    ".csv": decode_csv,
    ".parquet": decode_parquet_column,
    ".bin": read_twice,
}


def decoder_for(url: str) -> Any:
    for suffix in sorted(DECODERS, key=len, reverse=True):
        if url.endswith(suffix):
            return DECODERS[suffix]
    raise KeyError(url)


def decode(item: tuple[str, IO[bytes]]) -> tuple[str, str]:
    """The DataLoader's map function: (url, stream) -> (url, digest)."""
    url, stream = item
    try:
        return url, decoder_for(url)(stream)
    finally:
        stream.close()


def make_dataset() -> dict[str, bytes]:
    """Objects of every format, by key suffix; deterministic."""
    from PIL import Image

    rng = np.random.default_rng(0)
    objects: dict[str, bytes] = {}
    pixels = rng.integers(0, 255, size=(96, 128, 3), dtype=np.uint8)
    for fmt, suffix in (("JPEG", ".jpg"), ("PNG", ".png")):
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, format=fmt)
        objects[f"image{suffix}"] = out.getvalue()
    out = io.BytesIO()
    torch.save(
        {"weight": torch.arange(5000, dtype=torch.float32).reshape(50, 100), "bias": torch.ones(7)}, out
    )
    objects["model.pt"] = out.getvalue()
    out = io.BytesIO()
    np.save(out, rng.standard_normal((300, 40)))
    objects["array.npy"] = out.getvalue()
    out = io.BytesIO()
    np.savez_compressed(out, a=np.arange(1000), b=rng.standard_normal(77))
    objects["arrays.npz"] = out.getvalue()
    members = {f"member-{i}.txt": (f"member {i} " * (i * 300 + 1)).encode() for i in range(6)}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    objects["members.zip"] = out.getvalue()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    for suffix in (".tar", ".tar.any", ".tar.stream"):
        objects[f"members{suffix}"] = out.getvalue()
    objects["members.tar.gz"] = gzip.compress(out.getvalue(), mtime=0)
    objects["table.csv"] = "".join(f'{i},"name, {i}",{i * 0.5}\r\n' for i in range(2000)).encode()
    objects["blob.bin"] = rng.bytes(300_000)
    objects["table.parquet"] = parquet_table(columns=8, rows=2000, seed=1)
    return objects
