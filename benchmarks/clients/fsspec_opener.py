"""torchdata 0.9's FSSpecFileOpener (open_files_by_fsspec) over s3fs: the announcement's baseline."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import torchdata.datapipes  # noqa: F401  registers open_files_by_fsspec and readlines
import functools

from torch.utils.data import DataLoader
from torch.utils.data.datapipes.iter import IterableWrapper

from .common import Context, Measurement, consume_objects, consume_text, gil_pace
from .fsspec_writes import CONFIGURATION as WRITES_CONFIGURATION
from .fsspec_writes import checkpoint, dcp, upload_large, upload_small  # noqa: F401
from .images import consume_images, decode

NAME = "fsspec"
CONFIGURATION = (
    "IterableWrapper(urls).sharding_filter().open_files_by_fsspec(mode='rb'), s3fs defaults; "
    "images: .map(decode) of each opened file; " + WRITES_CONFIGURATION
)


def _opened(ctx: Context, urls: list[str]):  # type: ignore[no-untyped-def]
    return (
        IterableWrapper(urls)
        .sharding_filter()
        .open_files_by_fsspec(
            mode="rb", client_kwargs={"endpoint_url": ctx.endpoint_url, "region_name": ctx.region}
        )
    )


def _read_objects(ctx: Context) -> Measurement:
    return consume_objects(_opened(ctx, ctx.urls()), ctx)


large = _read_objects
small = _read_objects


def text(ctx: Context) -> Measurement:
    def make_loader() -> DataLoader:
        pipe = _opened(ctx, ctx.urls()).readlines(return_path=False)
        return DataLoader(pipe, batch_size=ctx.batch_size, num_workers=ctx.num_workers)

    return consume_text(make_loader, ctx)


# One 1 GiB object read the same way (the memory workload), and the large objects beside a Python thread.
stream = large
gil = gil_pace(large)


def _decode_opened(pair, verify: bool = False):  # type: ignore[no-untyped-def]
    _url, stream = pair
    return decode(stream, verify)


def images(ctx: Context) -> Measurement:
    def make_loader() -> DataLoader:
        pipe = _opened(ctx, ctx.urls()).map(functools.partial(_decode_opened, verify=ctx.verify))
        return DataLoader(pipe, batch_size=None, num_workers=ctx.num_workers)

    return consume_images(make_loader, ctx)
