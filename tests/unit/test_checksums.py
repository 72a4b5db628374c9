"""The CRT's checksums as the native module exposes them (used to check uploads at the wire)."""

from __future__ import annotations

from torchdata_s3 import _core


def test_check_values_of_the_catalogued_crcs() -> None:
    # The "check" values of CRC-32C (Castagnoli) and CRC-64/NVME for the ASCII digits 1-9.
    assert _core.crc32c(b"123456789") == 0xE3069283
    assert _core.crc64nvme(b"123456789") == 0xAE8B14860A799888


def test_incremental_and_any_buffer() -> None:
    data = bytes(range(256)) * 100
    assert _core.crc32c(data[1000:], _core.crc32c(data[:1000])) == _core.crc32c(data)
    head = _core.crc64nvme(bytearray(data[:7]))
    assert _core.crc64nvme(memoryview(data)[7:], head) == _core.crc64nvme(data)
    assert _core.crc32c(b"") == 0
