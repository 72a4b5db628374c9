"""torchdata 0.9's ``on_disk_cache`` around its original S3FileLoader, for the `epochs` workload: objects are
downloaded whole into files on the first epoch (``end_caching``), and later epochs open those files
without asking S3 anything (a file that exists is trusted). The pipeline torchdata's docs show for a
downloader, with the S3 loader as the downloader."""

from __future__ import annotations

import functools
import os
import warnings

from .common import Context, Measurement
from .epochs import cache_directory, consume_epochs
from .torchdata_original import _environment

NAME = "torchdata-on_disk_cache"
CONFIGURATION = (
    "IterableWrapper(urls).on_disk_cache(filepath_fn) -> S3FileLoader -> end_caching(mode='wb', "
    "same_filepath_fn=True) -> FileOpener(mode='b'); read(1 MiB)"
)


def _cached_path(directory: str, url: str) -> str:
    return os.path.join(directory, url.split("://", 1)[1])


def epochs(ctx: Context) -> Measurement:
    _environment(ctx)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchdata.datapipes.iter import FileOpener, IterableWrapper, S3FileLoader
    with cache_directory(ctx) as directory:
        path_of = functools.partial(_cached_path, directory)
        pipe = IterableWrapper(ctx.urls()).on_disk_cache(filepath_fn=path_of)
        pipe = S3FileLoader(pipe).end_caching(mode="wb", same_filepath_fn=True)
        pipe = FileOpener(pipe, mode="b")
        return consume_epochs(lambda: pipe, ctx)
