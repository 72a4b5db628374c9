"""s3fs's ``storage_options``, translated into an :class:`~torchdata_s3.S3Config`.

Code written for s3fs passes its options unchanged (``pd.read_parquet(url, storage_options={...})``): the
names below are s3fs's. A name that is neither s3fs's nor fsspec's own is refused with the list of accepted
ones, so a typo never silently falls back to a default.
"""

from __future__ import annotations

from typing import Any, Optional

from ..config import S3Config

# fsspec's own constructor options (AbstractFileSystem and its instance cache): accepted and passed on.
FSSPEC_OPTIONS = frozenset({"skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths"})
# s3fs's options that this file system honours (see S3FileSystem's docstring for each one's meaning).
S3FS_OPTIONS = frozenset(
    {
        "anon",
        "key",
        "secret",
        "token",
        "endpoint_url",
        "client_kwargs",
        "requester_pays",
        "default_block_size",
    }
)
# The keys of s3fs's ``client_kwargs`` (botocore client arguments) that mean something here.
CLIENT_KWARGS = frozenset({"endpoint_url", "region_name", "verify"})


def refuse_unknown(options: dict[str, Any]) -> None:
    """Raises TypeError naming every unknown option and the accepted ones."""
    unknown = sorted(set(options) - FSSPEC_OPTIONS - S3FS_OPTIONS - {"config"})
    if unknown:
        accepted = ", ".join(sorted(S3FS_OPTIONS | FSSPEC_OPTIONS | {"config"}))
        raise TypeError(
            f"unknown storage option(s) {', '.join(unknown)} for torchdata_s3's S3FileSystem; "
            f"accepted: {accepted}"
        )


def config_from_options(
    *,
    config: Optional[S3Config],
    anon: bool,
    key: Optional[str],
    secret: Optional[str],
    token: Optional[str],
    endpoint_url: Optional[str],
    client_kwargs: Optional[dict[str, Any]],
    requester_pays: bool,
) -> S3Config:
    """The S3Config these s3fs options describe: explicit options > ``config`` > the environment."""
    client_kwargs = dict(client_kwargs or {})
    unknown = sorted(set(client_kwargs) - CLIENT_KWARGS)
    if unknown:
        raise TypeError(
            f"unknown client_kwargs key(s) {', '.join(unknown)}; accepted: {', '.join(sorted(CLIENT_KWARGS))}"
        )
    explicit: dict[str, Any] = {}
    if requester_pays:
        explicit["requester_pays"] = True
    endpoint = endpoint_url or client_kwargs.get("endpoint_url")
    if endpoint:
        explicit["endpoint_url"] = endpoint
    if client_kwargs.get("region_name"):
        explicit["region"] = client_kwargs["region_name"]
    if "verify" in client_kwargs:
        verify = client_kwargs["verify"]
        if isinstance(verify, str):
            explicit["ca_file"] = verify  # botocore's verify= takes a CA bundle's path too
        else:
            explicit["verify_ssl"] = bool(verify)
    if anon:
        explicit["anonymous"] = True
    if key is not None or secret is not None:
        explicit.update(access_key_id=key, secret_access_key=secret, session_token=token)
    elif token is not None:
        raise ValueError("token= (a session token) needs key= and secret= as well")
    if config is None:
        return S3Config.resolve(**explicit)
    return config.replace(**explicit) if explicit else config
