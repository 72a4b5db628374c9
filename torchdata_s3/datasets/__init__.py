"""The Dataset door: ``torch.utils.data`` datasets over S3 objects, for PyTorch as it is today.

:class:`S3IterableDataset` shards over ranks and DataLoader workers, shuffles per epoch and resumes
mid-epoch (also with another number of ranks); :class:`S3MapDataset` gives random access by index with
concurrent batch fetches. Both need torch only. :mod:`.epochs` is the order and progress they resume by,
:mod:`.objects` the listed objects and how they are read.
"""

from .epochs import DatasetStateError
from .iterable import S3IterableDataset
from .map import S3MapDataset
from .objects import MissingObjectWarning

__all__ = ["DatasetStateError", "MissingObjectWarning", "S3IterableDataset", "S3MapDataset"]
