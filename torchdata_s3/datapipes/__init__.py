"""The DataPipe door: drop-ins for torchdata 0.4-0.9's S3 DataPipes, and the S3 saver.

``S3FileLister`` (``list_files_by_s3``), ``S3FileLoader`` (``load_files_by_s3``) and ``S3FileSaver``
(``save_by_s3``) are IterDataPipes of torch's own ``torch.utils.data.datapipes``: they need torch only, not
torchdata. Importing this package registers their functional names on torch's IterDataPipe; importing
:mod:`torchdata_s3` imports it once the program imports torch (at once if it already has).
"""

from .functional import install
from .lister import S3FileLister
from .loader import S3FileLoader
from .saver import S3FileSaver
from .shared_listing import list_files_once

__all__ = ["S3FileLister", "S3FileLoader", "S3FileSaver", "list_files_once"]

# Here, not in torchdata_s3's hook on torch's import: that hook imports this package, and when torch's first
# import comes from inside this package (its modules import torch), the hook finds it half-imported and
# returns; this line then registers the names once the package is whole.
install()
