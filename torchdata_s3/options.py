"""Turning the DataPipes' arguments (the original torchdata ones and ours) into one S3Config."""

from __future__ import annotations

from typing import Any, Optional

from .config import S3Config


def config_from_arguments(
    config: Optional[S3Config], *, region: str = "", request_timeout_ms: int = -1, **options: Any
) -> S3Config:
    """Applies the original positional arguments and keyword options on top of `config` (or the environment).

    The original torchdata DataPipes used ``region=""`` and ``request_timeout_ms=-1`` for "the default";
    both keep that meaning here. Other keyword options are :class:`S3Config` field names.
    """
    explicit: dict[str, Any] = dict(options)
    if region:
        explicit["region"] = region
    if request_timeout_ms is not None and request_timeout_ms != -1:
        explicit["request_timeout_ms"] = request_timeout_ms
    if config is None:
        return S3Config.resolve(**explicit)
    unknown = sorted(set(explicit) - set(S3Config.__dataclass_fields__))
    if unknown:
        raise TypeError(f"unknown S3 option(s) {', '.join(unknown)}")
    return config.replace(**explicit) if explicit else config
