"""``python -m torchdata_s3.cache DIR [--clear]``: a cache's entries, bytes and hit rate."""

from .object_cache import main

raise SystemExit(main())
