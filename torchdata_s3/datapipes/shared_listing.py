"""Listing a dataset once per job instead of once per DataLoader worker (and per rank).

In ``list_files_by_s3().sharding_filter()`` the sharding point sits after the lister, so every worker of
every rank lists the whole prefix and then drops what is not its share: W workers x R ranks full listings.
Listing up front and feeding the URLs to ``IterableWrapper(urls).sharding_filter().load_files_by_s3()``
costs one listing for the job, and every worker then splits the very same list, so shares stay disjoint
even if objects are added to the bucket while the job starts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Optional, Union

import torch.distributed as dist
from torch.utils.data.datapipes.iter import IterableWrapper

# The module, not its function: this module is imported when torch's first import registers the functional
# names, which can happen while torchdata_s3.distributed is still importing torch
# (tests/unit/test_functional_names.py).
from .. import distributed
from ..config import S3Config
from .lister import S3FileLister

__all__ = ["list_files_once"]


def list_files_once(
    prefixes: Union[str, Iterable[str]],
    masks: Union[str, list[str]] = "",
    *,
    config: Optional[S3Config] = None,
    page_size: Optional[int] = None,
    source_rank: int = 0,
    group: Optional[dist.ProcessGroup] = None,
    **options: Any,
) -> list[str]:
    r"""The ``s3://bucket/key`` URLs under ``prefixes``, listed by one process of the job.

    Without ``torch.distributed`` (or before ``init_process_group``) this process lists, exactly as
    :class:`S3FileLister` would (same order, masks, folder markers skipped). When a process group is
    initialized, only ``source_rank`` lists and the others receive its list through
    ``torch.distributed.broadcast_object_list``: this is then a collective call that every rank of
    ``group`` must make, with the same ``source_rank``. A listing failure on ``source_rank`` is raised on
    every rank instead of leaving the others waiting.

    Feed the result to ``IterableWrapper(urls, deepcopy=False).sharding_filter().load_files_by_s3()``:
    DataLoader workers and ranks then split the list without listing anything themselves.

    Args:
        prefixes: one ``s3://`` prefix or several (see :class:`S3FileLister` for what a prefix matches).
        masks: fnmatch pattern(s) matched against the full URL [``""``: all].
        config: an :class:`S3Config` [None: resolved from the environment].
        page_size: keys per ListObjectsV2 request [None: the server's maximum, 1000 on S3].
        source_rank: the global rank that lists when torch.distributed is initialized [0].
        group: the process group to share the list with [None: the default group].
        **options: any :class:`S3Config` field, overriding ``config``.

    Raises:
        RuntimeError: called in a DataLoader worker while torch.distributed is initialized.
        InvalidS3UrlError, S3FileNotFoundError (no such bucket), S3PermissionError, S3NetworkError, ...
        (on every rank when distributed).
    """
    prefixes = [prefixes] if isinstance(prefixes, str) else list(prefixes)

    def list_here() -> list[str]:
        lister = S3FileLister(
            IterableWrapper(prefixes, deepcopy=False),
            masks=masks,
            config=config,
            page_size=page_size,
            **options,
        )
        return list(lister)

    return distributed.computed_on_one_rank(
        list_here,
        what="list_files_once",
        in_worker_hint=" (in a DataLoader worker, use list_files_by_s3 instead)",
        source_rank=source_rank,
        group=group,
    )
