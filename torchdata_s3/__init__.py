"""torchdata_s3: stream training data from Amazon S3 (and S3-compatible stores) into PyTorch.

``S3FileLister`` and ``S3FileLoader`` are drop-in replacements for torchdata's S3 DataPipes (0.4-0.9),
built on the AWS Common Runtime: the GIL is released while waiting, objects download as parallel ranged
GETs, and objects are prefetched ahead of the reader. Importing this package registers the functional
names ``list_files_by_s3``, ``load_files_by_s3`` and ``save_by_s3`` on torch's IterDataPipe (once torch is
imported: this package does not import it until one of its torch-based names is used).

Writes: ``torchdata_s3.open(url, "wb")`` gives a writer whose ``close()`` commits the object;
``S3FileSaver`` (``save_by_s3``) writes ``(url, data)`` items with parallel uploads.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

try:
    from . import _core
except ImportError as error:
    from ._missing_core import explain

    raise ImportError(explain(error)) from error

from ._after_import import call_after_import
from .client import ObjectInfo, ObjectSummary, S3Client
from .config import S3Config
from .errors import (
    InvalidS3UrlError,
    S3Error,
    S3FileNotFoundError,
    S3IntegrityError,
    S3NetworkError,
    S3ObjectExistsError,
    S3PermissionError,
    S3TimeoutError,
    error_from_native,
)
from .opener import open
from .url import S3Url, parse_s3_url
from .writer import S3ObjectWriter

# The client, open(), the writer and the fsspec filesystem need no PyTorch (pandas and pyarrow users reach
# S3 through them alone); the DataPipes, datasets and checkpoints build on torch and exist only beside it.
# Their names are imported on first use (__getattr__), so that `import torchdata_s3` costs no torch import
# (seconds, hundreds of MiB); without torch, one of them asked for raises an ImportError that says what to
# install.
_HAS_TORCH = importlib.util.find_spec("torch") is not None
_TORCH_NAMES = {
    "DatasetStateError": ".datasets",
    "MissingObjectWarning": ".datasets",
    "S3FileLister": ".datapipes",
    "S3FileLoader": ".datapipes",
    "S3FileSaver": ".datapipes",
    "S3IterableDataset": ".datasets",
    "S3MapDataset": ".datasets",
    "list_files_once": ".datapipes",
    "load": ".checkpoint",
    "save": ".checkpoint",
}
if TYPE_CHECKING:
    from .checkpoint import load, save
    from .datapipes import S3FileLister, S3FileLoader, S3FileSaver, list_files_once
    from .datasets import DatasetStateError, MissingObjectWarning, S3IterableDataset, S3MapDataset


def _import_datapipes() -> None:
    importlib.import_module(".datapipes", __name__)  # which registers the functional names


if _HAS_TORCH:
    # Now if torch is already imported, else right after the program imports it (torchdata <= 0.9 does).
    call_after_import(
        "torch",
        _import_datapipes,
        "register list_files_by_s3, load_files_by_s3 and save_by_s3 on torch's IterDataPipe",
    )

__version__ = _core.__version__

__all__ = [
    "DatasetStateError",
    "InvalidS3UrlError",
    "MissingObjectWarning",
    "ObjectInfo",
    "ObjectSummary",
    "S3Client",
    "S3Config",
    "S3Error",
    "S3FileLister",
    "S3FileLoader",
    "S3FileNotFoundError",
    "S3FileSaver",
    "S3IntegrityError",
    "S3IterableDataset",
    "S3MapDataset",
    "S3NetworkError",
    "S3ObjectExistsError",
    "S3ObjectWriter",
    "S3PermissionError",
    "S3TimeoutError",
    "S3Url",
    "list_files_once",
    "load",
    "open",
    "parse_s3_url",
    "save",
]

_core.set_error_factory(error_from_native)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))  # the names imported on first use too


def __getattr__(name: str) -> object:
    # torchdata_s3.dcp imports torch.distributed.checkpoint (seconds): only when it is first used.
    # torchdata_s3.nodes needs torchdata >= 0.10 (torchdata.nodes): only when it is first used.
    if name in ("dcp", "nodes"):
        return importlib.import_module(f".{name}", __name__)
    module = _TORCH_NAMES.get(name)
    if module is not None and _HAS_TORCH:
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value  # once: later lookups do not come here
        return value
    if module is not None:
        raise ImportError(
            f"torchdata_s3.{name} needs PyTorch, which is not installed. Install the torch build for your "
            "platform first (e.g. `pip install torch`, see https://pytorch.org/get-started/); the client, "
            "torchdata_s3.open and the fsspec filesystem work without it."
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
