"""torchdata_s3: stream training data from Amazon S3 (and S3-compatible stores) into PyTorch.

``S3FileLister`` and ``S3FileLoader`` are drop-in replacements for torchdata's S3 DataPipes (0.4-0.9),
built on the AWS Common Runtime: the GIL is released while waiting, objects download as parallel ranged
GETs, and objects are prefetched ahead of the reader. Importing this package registers the functional
names ``list_files_by_s3``, ``load_files_by_s3`` and ``save_by_s3`` on torch's IterDataPipe.

Writes: ``torchdata_s3.open(url, "wb")`` gives a writer whose ``close()`` commits the object;
``S3FileSaver`` (``save_by_s3``) writes ``(url, data)`` items with parallel uploads.
"""

from __future__ import annotations

import importlib.util

try:
    from . import _core
except ImportError as error:
    from ._missing_core import explain

    raise ImportError(explain(error)) from error

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
# A name of theirs asked for without torch raises an ImportError that says what to install (__getattr__).
_HAS_TORCH = importlib.util.find_spec("torch") is not None
_NEEDS_TORCH = (
    "DatasetStateError",
    "MissingObjectWarning",
    "S3FileLister",
    "S3FileLoader",
    "S3FileSaver",
    "S3IterableDataset",
    "S3MapDataset",
    "list_files_once",
    "load",
    "save",
)
if _HAS_TORCH:
    from .checkpoint.torch_save import load, save
    from .datapipes.functional import install as _install_functional_names
    from .datapipes.lister import S3FileLister
    from .datapipes.loader import S3FileLoader
    from .datapipes.saver import S3FileSaver
    from .datapipes.shared_listing import list_files_once
    from .datasets import DatasetStateError, MissingObjectWarning, S3IterableDataset, S3MapDataset

    _install_functional_names()

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


def __getattr__(name: str) -> object:
    # torchdata_s3.dcp imports torch.distributed.checkpoint (seconds): only when it is first used.
    # torchdata_s3.nodes needs torchdata >= 0.10 (torchdata.nodes): only when it is first used.
    if name in ("dcp", "nodes"):
        return importlib.import_module(f".{name}", __name__)
    if name in _NEEDS_TORCH:
        raise ImportError(
            f"torchdata_s3.{name} needs PyTorch, which is not installed. Install the torch build for your "
            "platform first (e.g. `pip install torch`, see https://pytorch.org/get-started/); the client, "
            "torchdata_s3.open and the fsspec filesystem work without it."
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
