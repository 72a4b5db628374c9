"""The DataPipe door: drop-ins for torchdata 0.4-0.9's S3 DataPipes, and the S3 saver.

``S3FileLister`` (``list_files_by_s3``), ``S3FileLoader`` (``load_files_by_s3``) and ``S3FileSaver``
(``save_by_s3``) are IterDataPipes of torch's own ``torch.utils.data.datapipes``: they need torch only, not
torchdata. Importing :mod:`torchdata_s3` registers their functional names (once torch is imported).
"""

# torch before any module of this package: its first import registers the functional names
# (torchdata_s3/__init__.py), which imports this package's modules, and one of them half-imported at that
# moment could not be imported again.
import torch  # noqa: F401

from .lister import S3FileLister
from .loader import S3FileLoader
from .saver import S3FileSaver
from .shared_listing import list_files_once

__all__ = ["S3FileLister", "S3FileLoader", "S3FileSaver", "list_files_once"]
