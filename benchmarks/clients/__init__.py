"""Client adapters, one module each. Imported lazily: each run happens in its own process."""

from __future__ import annotations

import importlib
from types import ModuleType

from benchmarks.workloads import WORKLOADS as _REGISTRY

# name -> module; the order is the order of the report.
CLIENTS = {
    "torchdata_s3": "ours",
    "torchdata_s3-read_chunk": "ours_read_chunk",
    "torchdata_s3-open": "ours_open",  # upload-small one writer at a time, beside S3FileSaver
    "fsspec": "fsspec_opener",
    "s3fs": "s3fs_direct",
    "boto3": "boto3_get",
    "boto3-transfer": "boto3_transfer",
    "torchdata-original": "torchdata_original",
    "s3torchconnector": "s3torchconnector_client",
    "raw-http": "raw_http",
    # The `epochs` workload's: ours without its cache, the peers' caches, and the local-disk ceiling.
    "torchdata_s3-nocache": "ours_nocache",
    "fsspec-filecache": "fsspec_filecache",
    "fsspec-simplecache": "fsspec_simplecache",
    "torchdata-on_disk_cache": "torchdata_on_disk_cache",
    "local-disk": "local_disk",
}
OURS = "torchdata_s3"
# Other paths of ours (faster private ones, or one writer at a time), reported beside the headline figure;
# never a peer, never the headline.
OURS_VARIANTS = ("torchdata_s3-read_chunk", "torchdata_s3-nocache", "torchdata_s3-open")
CEILING = "raw-http"
LOCAL_DISK = "local-disk"  # the `epochs` workload's ceiling: the dataset's files read from local disk
CEILINGS = (CEILING, LOCAL_DISK)
WORKLOADS = tuple(_REGISTRY)


def is_peer(name: str) -> bool:
    return name != OURS and name not in CEILINGS and name not in OURS_VARIANTS


def load(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{CLIENTS[name]}")
