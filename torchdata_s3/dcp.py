"""``torchdata_s3.dcp``: the public path of :mod:`torchdata_s3.checkpoint.dcp` (S3StorageWriter,
S3StorageReader), kept so that ``from torchdata_s3.dcp import S3StorageWriter`` works."""

from .checkpoint.dcp import S3StorageReader, S3StorageWriter

__all__ = ["S3StorageReader", "S3StorageWriter"]
