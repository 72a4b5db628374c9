"""The ``torchdata.nodes`` door (torchdata >= 0.10): :class:`S3Source`, a resumable source node.

Importing this module needs ``torchdata.nodes``; ``import torchdata_s3`` does not import it.
"""

try:
    import torchdata.nodes  # noqa: F401
except ImportError as error:
    raise ImportError(
        "torchdata_s3.nodes needs torchdata >= 0.10, whose torchdata.nodes it builds on "
        f"({error}). Install it with `pip install 'torchdata>=0.10'`; with torchdata 0.9 or without "
        "torchdata, use torchdata_s3.S3IterableDataset or the DataPipes instead."
    ) from error

from .source import S3Source

__all__ = ["S3Source"]
