"""``torch.save`` to and ``torch.load`` from an ``s3://`` URL, in one call each, streaming both ways.

``save`` hands ``torch.save`` an :class:`S3ObjectWriter`: the serialized bytes go to S3 as they are produced
(parts uploaded in parallel, a bounded amount buffered), and the object appears only when the whole
checkpoint has been written; a failure while saving aborts the upload and leaves no object. ``load`` hands
``torch.load`` the seekable :class:`S3ObjectStream`, which fetches what torch reads as it reads it, up to
``load_window_bytes`` ahead (torch reads every byte).

Keywords are told apart by name: :class:`S3Config` fields (``endpoint_url=``, ``region=``, ...) and the
writer's ``overwrite=`` and ``checksum=`` configure S3; every other keyword (``pickle_protocol=``,
``map_location=``, ``weights_only=``, ``mmap=``, pickle's ``encoding=``, ...) goes to ``torch.save`` /
``torch.load`` unchanged. No name of one set is a name of the other (a test keeps it so).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import torch

from ..client import S3Client
from ..config import S3Config
from ..errors import S3Error
from ..opener import open as open_object
from ..options import config_from_arguments

__all__ = ["load", "save"]

# The writer's own keywords (torchdata_s3.open(url, "wb", ...)); they go to S3, not to torch.save.
WRITER_KEYWORDS = frozenset({"overwrite", "checksum"})
S3_OPTION_NAMES = frozenset(field.name for field in dataclasses.fields(S3Config))


def split_keywords(keywords: dict[str, Any], s3_names: frozenset[str]) -> tuple[dict, dict]:
    """``(S3 keywords, torch keywords)``: the names in `s3_names` go to S3, the rest to torch."""
    s3 = {name: value for name, value in keywords.items() if name in s3_names}
    passed_on = {name: value for name, value in keywords.items() if name not in s3_names}
    return s3, passed_on


def save(obj: Any, url: str, *, config: Optional[S3Config] = None, **keywords: Any) -> None:
    """``torch.save(obj, ...)`` into the S3 object `url`, streamed: no whole copy of the checkpoint in memory.

    The object appears (or replaces the previous one) only when the whole checkpoint is written; if
    pickling or an upload fails, the upload is aborted and nothing is left behind.

    Args:
        obj: what to save, as for ``torch.save``.
        url: ``s3://bucket/key`` of the object to write.
        config: the S3 configuration [None: :meth:`S3Config.resolve` from the environment].
        **keywords: :class:`S3Config` fields (e.g. ``endpoint_url=``), and the writer's ``overwrite``
            [True; False refuses to replace an existing object] and ``checksum`` [None; ``"crc32c"`` or
            ``"crc64nvme"``: the server verifies it]; any other keyword goes to ``torch.save``
            (``pickle_protocol=``, ...).

    Raises:
        InvalidS3UrlError: a malformed URL. IsADirectoryError: the URL names a prefix.
        S3ObjectExistsError (a FileExistsError): ``overwrite=False`` and the object exists.
        S3Error and its subclasses: a failed request. Whatever ``torch.save`` raises (e.g. pickling errors).
    """
    s3, torch_keywords = split_keywords(keywords, S3_OPTION_NAMES | WRITER_KEYWORDS)
    with open_object(url, "wb", config=config, **s3) as stream:
        torch.save(obj, stream, **torch_keywords)


def load(url: str, *, config: Optional[S3Config] = None, **keywords: Any) -> Any:
    """``torch.load`` of the S3 object `url`, read through a seekable stream as torch asks for the bytes.

    Args:
        url: ``s3://bucket/key`` of an object written by ``torch.save`` (or :func:`save`).
        config: the S3 configuration [None: :meth:`S3Config.resolve` from the environment].
        **keywords: :class:`S3Config` fields (e.g. ``endpoint_url=``); any other keyword goes to
            ``torch.load`` (``map_location=``, ``weights_only=`` [torch's default: True], pickle's
            ``encoding=``, ...). ``mmap=True`` needs a local file and is refused by torch.

    Raises:
        InvalidS3UrlError: a malformed URL. IsADirectoryError: the URL names a prefix.
        S3FileNotFoundError: no such object or bucket. S3Error and its subclasses: a failed request, also
            one that fails while torch reads a tensor's bytes.
        Whatever ``torch.load`` raises for what it reads (e.g. ``pickle.UnpicklingError`` when
        ``weights_only=True`` meets a type it does not allow).
    """
    s3, torch_keywords = split_keywords(keywords, S3_OPTION_NAMES)
    client = S3Client(config_from_arguments(config, **s3))
    with client.open(url, "rb", window_bytes=client.config.load_window_bytes) as stream:
        return torch_load(stream, **torch_keywords)


def torch_load(stream: Any, **torch_keywords: Any) -> Any:
    """``torch.load(stream, ...)``, raising a failed read's S3Error as itself.

    torch's zip reader (C++) calls back into Python with a failed read's exception still set. CPython then
    reports another exception: mostly ``SystemError: ... returned a result with an exception set``, or, when
    an attribute lookup misses the type cache meanwhile, an ``AttributeError`` that has lost the read's error
    entirely. The stream remembers its failed read (``failure``), so this raises that typed error instead.
    """
    try:
        return torch.load(stream, **torch_keywords)
    except S3Error:
        raise
    except Exception:
        failed_read = getattr(stream, "failure", None)
        if failed_read is not None:
            raise failed_read from None
        raise
