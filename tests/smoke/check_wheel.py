"""The smoke test of an installed wheel: run by tests/smoke/run_wheels.py with the python of a fresh virtual
environment holding nothing but the wheel and its dependencies (and, where this machine has a torch build
for that Python, torch and torchdata 0.11).

Standard library only besides what it tests, so that it runs on every Python the wheels are built for. It
talks to the S3-protocol server the runner started (AWS_ENDPOINT_URL), in the bucket given as argv[1], and
prints one line per door it went through; any failure is an exception and a non-zero exit.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import sys
import sysconfig

COMPILERS = ("cc", "gcc", "g++", "c++", "clang", "clang++", "zig")


def check(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


def payload(name: str, size: int) -> bytes:
    # Bytes that differ per object and per position, so a misplaced part or a swapped object shows.
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def installed_from_the_wheel() -> None:
    import torchdata_s3
    import torchdata_s3._core as core

    site = sysconfig.get_paths()["platlib"]
    check(core.__file__.startswith(site + os.sep), f"imported {core.__file__}, not the wheel in {site}")
    found = [name for name in COMPILERS if shutil.which(name)]
    check(not found, f"a compiler is on PATH ({found}): the wheel must install and run without one")
    print(f"import: torchdata_s3 {torchdata_s3.__version__} from {core.__file__}")


def client_and_open(bucket: str) -> dict[str, bytes]:
    import torchdata_s3

    objects = {
        f"smoke/train/obj-{i}.bin": payload(f"obj-{i}", size) for i, size in enumerate((0, 1, 110_000))
    }
    # Above the 8 MiB multipart threshold: several parts uploaded and fetched in parallel.
    objects["smoke/train/large.bin"] = payload("large", 20 * 1024 * 1024 + 12_345)
    for key, data in objects.items():
        with torchdata_s3.open(f"s3://{bucket}/{key}", "wb") as writer:
            writer.write(data)
    client = torchdata_s3.S3Client()
    listed = {summary.key: summary.size for summary in client.list_objects(f"s3://{bucket}/smoke/train/")}
    check(listed == {key: len(data) for key, data in objects.items()}, f"listing gave {listed}")
    for key, data in objects.items():
        with torchdata_s3.open(f"s3://{bucket}/{key}") as reader:
            check(reader.read() == data, f"read() of s3://{bucket}/{key} differs from what was written")
    with torchdata_s3.open(f"s3://{bucket}/smoke/train/large.bin") as reader:
        reader.seek(-5000, io.SEEK_END)
        check(reader.read() == objects["smoke/train/large.bin"][-5000:], "seek then read differs")
    print(f"client: wrote, listed and read back {len(objects)} objects")
    return objects


def fsspec_door(bucket: str, objects: dict[str, bytes]) -> None:
    import fsspec

    fs = fsspec.filesystem("s3crt", skip_instance_cache=True)
    keys = sorted(objects)
    check(fs.ls(f"{bucket}/smoke/train", detail=False) == [f"{bucket}/{key}" for key in keys], "fsspec ls")
    fetched = fs.cat([f"{bucket}/{key}" for key in keys])
    check(fetched == {f"{bucket}/{key}": objects[key] for key in keys}, "fsspec cat of many paths differs")
    large = objects["smoke/train/large.bin"]
    path = f"{bucket}/smoke/train/large.bin"
    parts = fs.cat_ranges([path] * 3, [0, 9_000_000, len(large) - 10], [100, 9_000_100, len(large)])
    check(parts == [large[:100], large[9_000_000:9_000_100], large[-10:]], "fsspec cat_ranges differs")
    with fsspec.open(f"s3crt://{bucket}/smoke/fsspec.txt", "w") as handle:
        handle.write("written through fsspec\n")
    check(fs.cat_file(f"{bucket}/smoke/fsspec.txt") == b"written through fsspec\n", "fsspec write")
    print("fsspec: ls, cat, cat_ranges and a text write through s3crt://")


def without_torch() -> None:
    import torchdata_s3

    for name in ("S3FileLoader", "S3IterableDataset", "save"):
        try:
            getattr(torchdata_s3, name)
        except ImportError as error:
            check("needs PyTorch" in str(error), f"torchdata_s3.{name} without torch said: {error}")
        else:
            raise AssertionError(f"torchdata_s3.{name} was available without torch")
    print("torch: not installed for this Python; the doors that need it say so")


def torch_doors(bucket: str, objects: dict[str, bytes]) -> None:
    import torch
    from torch.utils.data import DataLoader
    from torch.utils.data.datapipes.iter import IterableWrapper

    import torchdata_s3

    prefix = f"s3://{bucket}/smoke/train/"
    expected = {f"s3://{bucket}/{key}": data for key, data in objects.items()}

    pipe = IterableWrapper([prefix]).list_files_by_s3().load_files_by_s3()
    check({url: stream.read() for url, stream in pipe} == expected, "DataPipes: list then load differs")

    def read(stream):
        return stream.url, stream.read()

    dataset = torchdata_s3.S3IterableDataset.from_prefix(prefix, transform=read)
    loaded = dict(DataLoader(dataset, batch_size=None, num_workers=2))
    check(loaded == expected, "S3IterableDataset through a 2-worker DataLoader differs")
    mapped = torchdata_s3.S3MapDataset.from_prefix(prefix, transform=read)
    check(dict(mapped[i] for i in range(len(mapped))) == expected, "S3MapDataset differs")

    state = {"weight": torch.arange(1_000_000, dtype=torch.float32), "step": 7}
    url = f"s3://{bucket}/smoke/checkpoint.pt"
    torchdata_s3.save(state, url)
    loaded_state = torchdata_s3.load(url, map_location="cpu")
    check(loaded_state["step"] == 7 and torch.equal(loaded_state["weight"], state["weight"]), "checkpoint")
    doors = "DataPipes, S3IterableDataset (2 workers), S3MapDataset, a checkpoint round trip"

    try:
        from torchdata.nodes import Loader
    except ImportError:
        pass
    else:
        from torchdata_s3.nodes import S3Source

        check(dict(Loader(S3Source(prefix, transform=read))) == expected, "nodes.S3Source differs")
        doors += ", nodes.S3Source"
    print(f"torch {torch.__version__}: {doors}")


def main() -> None:
    bucket = sys.argv[1]
    installed_from_the_wheel()
    objects = client_and_open(bucket)
    fsspec_door(bucket, objects)
    try:
        import torch  # noqa: F401
    except ImportError:
        without_torch()
    else:
        torch_doors(bucket, objects)
    print(f"smoke: passed on Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
