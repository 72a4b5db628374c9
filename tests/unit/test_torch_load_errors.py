"""torch_load raises a failed read's S3Error even when torch's C++ reader lost it.

The real path (a fault proxy dropping parts while torch reads a tensor) is
tests/integration/test_checkpoint.py::test_a_read_failing_while_torch_reads_a_tensor_raises_the_typed_error.
How CPython reports the lost error depends on its type cache, so that test cannot choose the form; these
force each form with a stream whose failed read is recorded the way ObjectReader records it.
"""

from __future__ import annotations

import io
from typing import Optional

import pytest

from torchdata_s3.checkpoint.torch_save import torch_load
from torchdata_s3.errors import S3NetworkError

URL = "s3://bucket/model.pt"


class StreamThatLostItsError(io.RawIOBase):
    """Its first read fails with an S3Error, kept as ``failure``; the next raises what torch reported."""

    def __init__(self, reported: Exception, *, read_fails: bool = True) -> None:
        super().__init__()
        self.failure: Optional[S3NetworkError] = None
        self.reported = reported
        self.read_fails = read_fails

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return 0

    def tell(self) -> int:
        return 0

    def readinto(self, buffer: object) -> int:
        if self.read_fails and self.failure is None:
            self.failure = S3NetworkError("connection reset", url=URL, operation="GetObject")
            try:
                raise self.failure
            except S3NetworkError:
                pass  # what torch's reader does with it: nothing the caller sees
        raise self.reported


@pytest.mark.parametrize(
    "reported",
    [
        AttributeError("'S3ObjectStream' object has no attribute 'raw'"),
        SystemError("<method 'read'> returned a result with an exception set"),
    ],
)
def test_the_recorded_failure_is_raised_instead_of_what_torch_reported(reported: Exception) -> None:
    stream = StreamThatLostItsError(reported)
    with pytest.raises(S3NetworkError) as raised:
        torch_load(stream, weights_only=True)
    assert raised.value is stream.failure


def test_an_error_without_a_failed_read_is_raised_as_it_is() -> None:
    stream = StreamThatLostItsError(AttributeError("a real bug"), read_fails=False)
    with pytest.raises(AttributeError, match="a real bug"):
        torch_load(stream, weights_only=True)
