"""torchdata_s3 variant: small objects uploaded one writer at a time (``torchdata_s3.open(url, "wb")`` in a
loop), beside the headline's ``S3FileSaver``. Not a peer: shows what the bulk path adds."""

from __future__ import annotations

from .common import Context, Measurement
from .ours_writes import _writer_opener
from .uploads import one_at_a_time, time_uploads

NAME = "torchdata_s3-open"
CONFIGURATION = "with torchdata_s3.open(url, 'wb') as f: f.write(data), one object after another, defaults"


def upload_small(ctx: Context) -> Measurement:
    return time_uploads(ctx, one_at_a_time(_writer_opener(ctx)))
