"""The local object cache (``cache_dir``): epochs after the first read from local disk.

:mod:`.object_cache` is the policy (when an entry may be served or written), :mod:`.store` the files,
:mod:`.entry` and :mod:`.entry_writer` one entry's format and its writer, :mod:`.streams` the readers over
an entry, :mod:`.locks` and :mod:`.writes` the writer locks and the writes thread.
``python -m torchdata_s3.cache DIR [--clear]`` reports (or clears) a cache.
"""

from .object_cache import CacheUnavailableWarning, ObjectCache, cache_info, clear_cache, object_cache

__all__ = ["CacheUnavailableWarning", "ObjectCache", "cache_info", "clear_cache", "object_cache"]
