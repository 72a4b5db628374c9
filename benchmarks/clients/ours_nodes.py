"""torchdata_s3.nodes.S3Source under torchdata.nodes' ParallelMapper (threads) and Loader (issue 20): a
variant of ours, reported beside the headline ``torchdata_s3`` (load_files_by_s3) figure.

``torchdata.nodes`` needs torchdata >= 0.10, and the harness's environment has torchdata 0.9 (the
``torchdata-original`` peer's). So this client's measuring process (each measurement runs in one of its own)
gets torchdata 0.11 first on its path: ``PYTHONPATH`` in ``benchmarks.clients``, the directory made by
``benchmarks.clients.ensure_paths`` when missing. This module needs torchdata.nodes only inside the
measurement: the harness itself imports it to see which workloads it has, and there it is missing.
"""

from __future__ import annotations

from typing import Any

import torch  # noqa: F401  (imported before the measurement's RSS baseline, as every client's library is)

from .common import Context, Measurement
from .dataset_loaders import WORKERS, consume, prefix_url, transform_for

try:  # in the measuring process, whose path has torchdata 0.11 first: imported before the RSS baseline too
    import torchdata.nodes  # noqa: F401

    import torchdata_s3.nodes  # noqa: F401
except ImportError:  # the harness's own process (torchdata 0.9), which only asks which workloads it has
    pass

NAME = "torchdata_s3-nodes"
CONFIGURATION = (
    "nodes.S3Source(prefix, endpoint_url=, region=) defaults (yields each object's stream; prefetch 128 "
    f"within 512 MiB), listed before the clock; ParallelMapper(map_fn, num_workers={WORKERS}, "
    "method='thread', in_order=True) then Loader; small: map_fn stream.read(); images: map_fn decode; "
    "torchdata 0.11"
)


def _measure(ctx: Context, workload: str) -> Measurement:
    import torchdata
    from torchdata.nodes import Loader, ParallelMapper

    from torchdata_s3.nodes import S3Source

    # The source yields each object's stream (it stays in this process: the mapper's workers are threads),
    # and the mapper's threads read or decode it, as the source's documentation suggests.
    source = S3Source(prefix_url(ctx), endpoint_url=ctx.endpoint_url, region=ctx.region, **ctx.options)
    map_fn = transform_for(workload, ctx)

    def make_loader() -> Any:
        return Loader(ParallelMapper(source, map_fn, num_workers=WORKERS, method="thread", in_order=True))

    measurement = consume(workload, make_loader, ctx, batched=False)
    measurement.extra["torchdata"] = torchdata.__version__
    return measurement


def small(ctx: Context) -> Measurement:
    return _measure(ctx, "small")


def images(ctx: Context) -> Measurement:
    return _measure(ctx, "images")
