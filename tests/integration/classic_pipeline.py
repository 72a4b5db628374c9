"""Runs the original announcement's pipeline in a fresh interpreter and prints what it read, as JSON.

    python classic_pipeline.py URL WORKERS {with-torchdata,without-torchdata} [START_METHOD] [SHARD_UPSTREAM]

Used by test_dataloader.py; a separate process so that which packages are importable, and in what order the
functional names get registered, is exactly what the test says.
"""

from __future__ import annotations

import json
import sys

# Module level, so that spawned workers (which re-import this file) see the same packages as the parent.
TORCHDATA_MODE = sys.argv[3]
if TORCHDATA_MODE == "without-torchdata":
    sys.modules["torchdata"] = None  # type: ignore[assignment]  # makes `import torchdata` fail
elif TORCHDATA_MODE == "with-torchdata":
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torchdata.datapipes  # noqa: F401  registers torchdata's names first
else:
    raise SystemExit(f"unknown mode {TORCHDATA_MODE}")

from torch.utils.data import DataLoader  # noqa: E402
from torch.utils.data.datapipes.iter import IterableWrapper  # noqa: E402

import torchdata_s3  # noqa: E402, F401


def main() -> None:
    url, num_workers = sys.argv[1], int(sys.argv[2])
    start_method = sys.argv[4] if len(sys.argv) > 4 else "fork"
    shard_upstream = len(sys.argv) > 5 and sys.argv[5] == "shard-upstream"
    if shard_upstream:
        pipe = IterableWrapper([url]).list_files_by_s3().sharding_filter().load_files_by_s3()
    else:
        pipe = IterableWrapper([url]).load_files_by_s3()
    pipe = pipe.readlines(return_path=False)
    context = start_method if num_workers > 0 else None
    loader = DataLoader(pipe, batch_size=16, num_workers=num_workers, multiprocessing_context=context)
    lines = [line.decode() for batch in loader for line in batch]
    print(json.dumps({"lines": lines, "readlines": type(pipe).__module__}))


if __name__ == "__main__":
    main()
