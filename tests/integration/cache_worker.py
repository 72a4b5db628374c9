"""Run as a process by the cache tests: reads a prefix through the loader with a cache, as one training
process would. Usage: python cache_worker.py PREFIX CACHE_DIR MODE

MODE ``all``: prints one JSON line ``{"digests": {url: sha256}, "fetched": bytes from S3}``.
MODE ``fsize``: as ``all`` under a 1 MiB file-size limit (RLIMIT_FSIZE), also reporting the warnings.
MODE ``stall``: reads the first MiB of the first object, prints ``reading`` and sleeps (to be killed).
"""

from __future__ import annotations

import hashlib
import json
import resource
import signal
import sys
import time
import warnings

from torch.utils.data.datapipes.iter import IterableWrapper

from torchdata_s3 import S3FileLoader

MiB = 1024 * 1024


def main() -> None:
    prefix, cache_dir, mode = sys.argv[1:4]
    if mode == "fsize":
        # Past the limit a write fails with EFBIG instead of the process being killed by SIGXFSZ.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (MiB, MiB))
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        report = read(prefix, cache_dir, mode)
    if report is not None:
        report["warnings"] = [str(warning.message) for warning in caught]
        print(json.dumps(report), flush=True)


def read(prefix: str, cache_dir: str, mode: str) -> dict | None:
    loader = S3FileLoader(IterableWrapper([prefix]), cache_dir=cache_dir, part_size_bytes=256 * 1024)
    digests, fetched = {}, 0
    for url, stream in loader:
        if mode == "stall":
            stream.read(MiB)
            print("reading", flush=True)
            time.sleep(120)  # bounded: the test kills this process long before
            return None
        digests[url] = hashlib.sha256(stream.read()).hexdigest()
        fetched += stream.bytes_fetched
        stream.close()
    return {"digests": digests, "fetched": fetched}


if __name__ == "__main__":
    main()
