"""The DataPipe door: drop-ins for torchdata 0.4-0.9's S3 DataPipes, and the S3 saver.

``S3FileLister`` (``list_files_by_s3``), ``S3FileLoader`` (``load_files_by_s3``) and ``S3FileSaver``
(``save_by_s3``) are IterDataPipes of torch's own ``torch.utils.data.datapipes``: they need torch only, not
torchdata. Importing :mod:`torchdata_s3` registers their functional names.
"""

from .lister import S3FileLister
from .loader import S3FileLoader
from .saver import S3FileSaver
from .shared_listing import list_files_once

__all__ = ["S3FileLister", "S3FileLoader", "S3FileSaver", "list_files_once"]
