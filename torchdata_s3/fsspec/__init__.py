"""fsspec file system on torchdata_s3's native core: ``s3crt://bucket/key`` for pandas, pyarrow, dask, Hugging
Face and anything else that opens files through fsspec.

``s3crt://`` is registered when torchdata_s3 is installed (the ``fsspec.specs`` entry point). Code whose URLs
say ``s3://`` can opt in with :func:`register_s3`; installing torchdata_s3 never takes ``s3://`` from s3fs.
"""

from __future__ import annotations

from .filesystem import S3FileSystem

__all__ = ["S3FileSystem", "register_s3"]


def register_s3() -> None:
    """Serve ``s3://`` and ``s3a://`` with :class:`S3FileSystem` in this process (instead of s3fs)."""
    import fsspec

    for protocol in ("s3", "s3a"):
        fsspec.register_implementation(protocol, S3FileSystem, clobber=True)
