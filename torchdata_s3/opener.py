"""``torchdata_s3.open``: one call for a reader or a writer of an ``s3://`` URL, as the builtin ``open``."""

from __future__ import annotations

from typing import Any, Optional, Union

from .client import S3Client
from .config import S3Config
from .options import config_from_arguments
from .reader import S3ObjectStream
from .writer import S3ObjectWriter

__all__ = ["open"]


def open(  # deliberately the builtin's name, as io.open and fsspec.open
    url: str,
    mode: str = "rb",
    *,
    config: Optional[S3Config] = None,
    overwrite: bool = True,
    checksum: Optional[str] = None,
    **options: Any,
) -> Union[S3ObjectStream, S3ObjectWriter]:
    """Opens ``s3://bucket/key`` for reading (``"rb"``) or writing (``"wb"``).

    Readers are seekable :class:`~torchdata_s3.reader.S3ObjectStream` objects (``io.BufferedReader``);
    writers are :class:`~torchdata_s3.writer.S3ObjectWriter` objects whose ``close()`` commits the object.
    Both are context managers. See :meth:`torchdata_s3.S3Client.open` for ``overwrite`` and ``checksum``.

    Args:
        url: ``s3://bucket/key``.
        mode: ``"rb"`` [default] or ``"wb"``.
        config: the client configuration [None: :meth:`S3Config.resolve` from the environment].
        **options: :class:`S3Config` fields applied on top of ``config``, e.g. ``endpoint_url=...``.

    Raises:
        InvalidS3UrlError, IsADirectoryError, ValueError (mode), TypeError (an unknown option); request
        errors as described for readers and writers.
    """
    return S3Client(config_from_arguments(config, **options)).open(
        url, mode, overwrite=overwrite, checksum=checksum
    )
