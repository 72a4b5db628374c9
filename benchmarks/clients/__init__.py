"""Client adapters, one module each. Imported lazily: each run happens in its own process."""

from __future__ import annotations

import importlib
from types import ModuleType

# name -> module; the order is the order of the report.
CLIENTS = {
    "torchdata_s3": "ours",
    "fsspec": "fsspec_opener",
    "s3fs": "s3fs_direct",
    "boto3": "boto3_get",
    "boto3-transfer": "boto3_transfer",
    "torchdata-original": "torchdata_original",
    "s3torchconnector": "s3torchconnector_client",
    "raw-http": "raw_http",
}
OURS = "torchdata_s3"
CEILING = "raw-http"
WORKLOADS = ("text", "large", "small", "listing", "stream", "gil")


def load(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{CLIENTS[name]}")
