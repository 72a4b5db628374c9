"""fsspec's own abstract test suite (shipped in the fsspec wheel), unmodified, against our file system on a
real S3-protocol server: cp, get, put, pipe and open, as every fsspec implementation is held to."""

from __future__ import annotations

import posixpath

import fsspec.tests.abstract as abstract
import pytest

from tests.conftest import TEST_ACCESS_KEY, TEST_SECRET_KEY
from torchdata_s3.fsspec import S3FileSystem


class S3CrtFixtures(abstract.AbstractFixtures):
    @pytest.fixture
    def fs(self, s3_endpoint: str) -> S3FileSystem:
        return S3FileSystem(
            endpoint_url=s3_endpoint, key=TEST_ACCESS_KEY, secret=TEST_SECRET_KEY, skip_instance_cache=True
        )

    @pytest.fixture
    def fs_path(self, bucket: str) -> str:
        return bucket

    @pytest.fixture
    def fs_join(self):  # type: ignore[no-untyped-def]
        return posixpath.join

    @pytest.fixture
    def supports_empty_directories(self) -> bool:
        return False  # S3 has prefixes, not directories (as in s3fs)


class TestCopy(abstract.AbstractCopyTests, S3CrtFixtures):
    pass


class TestGet(abstract.AbstractGetTests, S3CrtFixtures):
    pass


class TestPut(abstract.AbstractPutTests, S3CrtFixtures):
    pass


class TestPipe(abstract.AbstractPipeTests, S3CrtFixtures):
    pass


class TestOpen(abstract.AbstractOpenTests, S3CrtFixtures):
    pass
