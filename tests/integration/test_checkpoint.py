"""torchdata_s3.save / torchdata_s3.load against a real S3-protocol server: round trips of what people save
(tensors, nested containers, a module's state_dict), torch's keywords passed through, refusals and typed
errors."""

from __future__ import annotations

import io
import pickle
import re

import pytest
import torch

import torchdata_s3
from tests.fault_proxy import Fault, FaultProxy, ProxiedRequest
from tests.s3_server import MotoServer

pytestmark = pytest.mark.integration

PART = 8 * 1024 * 1024


def assert_same(loaded: object, saved: object) -> None:
    if isinstance(saved, torch.Tensor):
        assert isinstance(loaded, torch.Tensor)
        assert loaded.dtype == saved.dtype and torch.equal(loaded, saved)
    elif isinstance(saved, dict):
        assert isinstance(loaded, dict) and loaded.keys() == saved.keys()
        for key in saved:
            assert_same(loaded[key], saved[key])
    elif isinstance(saved, (list, tuple)):
        assert type(loaded) is type(saved) and len(loaded) == len(saved)
        for left, right in zip(loaded, saved):
            assert_same(left, right)
    else:
        assert loaded == saved


def test_nested_tensors_round_trip_and_match_torch_save_byte_for_byte(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    generator = torch.Generator().manual_seed(0)
    state = {
        "weights": torch.randn(512, 1024, generator=generator),  # 2 MiB
        "layers": [torch.arange(10, dtype=torch.int64), (torch.ones(3, dtype=torch.bfloat16), 3.5)],
        "nested": {"step": 7, "name": "run-1", "empty": torch.empty(0)},
    }
    url = f"s3://{bucket}/ckpt/state.pt"
    torchdata_s3.save(state, url)

    assert_same(torchdata_s3.load(url), state)
    # What landed is exactly what torch.save writes to a file.
    expected = io.BytesIO()
    torch.save(state, expected)
    assert boto_s3.get_object(Bucket=bucket, Key="ckpt/state.pt")["Body"].read() == expected.getvalue()


def test_a_module_state_dict_loads_with_weights_only_into_a_new_module(bucket: str) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.BatchNorm1d(32), torch.nn.Linear(32, 4))
    url = f"s3://{bucket}/model.pt"
    torchdata_s3.save(model.state_dict(), url)

    fresh = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.BatchNorm1d(32), torch.nn.Linear(32, 4))
    fresh.load_state_dict(torchdata_s3.load(url, weights_only=True, map_location="cpu"))
    assert_same(fresh.state_dict(), model.state_dict())


class NotAllowedByWeightsOnly:
    def __init__(self, value: int) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NotAllowedByWeightsOnly) and other.value == self.value


def test_torch_keywords_pass_through_and_s3_options_configure_s3(bucket: str, s3_endpoint: str) -> None:
    url = f"s3://{bucket}/pickled.pt"
    # endpoint_url is an S3Config field: it goes to S3 (the environment names the same server); the
    # pickle_protocol keyword goes to torch.save.
    torchdata_s3.save(
        {"object": NotAllowedByWeightsOnly(3)}, url, endpoint_url=s3_endpoint, pickle_protocol=2
    )
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        torchdata_s3.load(url)  # torch's default: weights_only=True
    assert torchdata_s3.load(url, weights_only=False, endpoint_url=s3_endpoint) == {
        "object": NotAllowedByWeightsOnly(3)
    }


def test_overwrite_false_refuses_an_existing_object_and_keeps_it(bucket: str) -> None:
    url = f"s3://{bucket}/keep.pt"
    torchdata_s3.save(torch.ones(4), url)
    with pytest.raises(FileExistsError) as refused:
        torchdata_s3.save(torch.zeros(4), url, overwrite=False)
    assert url in str(refused.value)
    assert torch.equal(torchdata_s3.load(url), torch.ones(4))
    torchdata_s3.save(torch.zeros(4), url)  # overwrite=True, the default, replaces it
    assert torch.equal(torchdata_s3.load(url), torch.zeros(4))


def test_a_save_that_fails_while_pickling_leaves_no_object(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    url = f"s3://{bucket}/broken.pt"
    # torch.save pickles the structure before it writes a byte: the writer is open and empty when the lambda
    # fails, and closing it instead of aborting would leave an empty object.
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        torchdata_s3.save({"big": torch.zeros(3 * 1024 * 1024), "bad": lambda: None}, url)
    assert boto_s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


def test_loading_a_missing_object_raises_a_typed_error_naming_the_url(bucket: str) -> None:
    url = f"s3://{bucket}/missing.pt"
    with pytest.raises(torchdata_s3.S3FileNotFoundError) as missing:
        torchdata_s3.load(url)
    assert url in str(missing.value) and "NoSuchKey" in str(missing.value)


@pytest.mark.parametrize("url", ["s3://", "not-a-url", "s3://bucket/prefix/"])
def test_bad_urls_are_refused_before_any_request(url: str, s3_endpoint: str) -> None:
    with pytest.raises((torchdata_s3.InvalidS3UrlError, IsADirectoryError)) as refused:
        torchdata_s3.save(torch.ones(1), url)
    assert url in str(refused.value)
    with pytest.raises((torchdata_s3.InvalidS3UrlError, IsADirectoryError)):
        torchdata_s3.load(url)


def starts_past_the_first_part(request: ProxiedRequest) -> bool:
    ranged = re.match(r"bytes=(\d+)-", request.headers.get("range", ""))
    return request.is_get_object and ranged is not None and int(ranged.group(1)) >= PART


def test_a_read_failing_while_torch_reads_a_tensor_raises_the_typed_error(
    bucket: str, moto_server: MotoServer
) -> None:
    url = f"s3://{bucket}/large.pt"
    state = {"first": torch.ones(PART // 4), "second": torch.zeros(PART // 4)}  # 16 MiB: three parts
    torchdata_s3.save(state, url)
    with FaultProxy(moto_server.port) as proxy:
        # The head of the object and its tail (the zip directory) arrive; every part after the first is
        # dropped, so torch's C++ reader meets the failure in the middle of the first tensor.
        proxy.force(Fault.DROP, count=1000, eligible=starts_past_the_first_part)
        with pytest.raises(torchdata_s3.S3NetworkError) as failed:
            torchdata_s3.load(url, endpoint_url=proxy.endpoint_url, part_size_bytes=PART, max_retries=0)
    assert url in str(failed.value)
    assert proxy.injected[Fault.DROP] >= 1


def test_load_reads_with_its_own_window_and_open_takes_one(
    bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load() reads every byte, so it reads ahead by load_window_bytes, not by a stream's read_window_bytes;
    S3Client.open takes the window for a reader and refuses it for a writer."""
    url = f"s3://{bucket}/windowed.pt"
    state = {"weights": torch.arange(3 * PART // 4, dtype=torch.float32)}  # 3 parts
    torchdata_s3.save(state, url)
    client = torchdata_s3.S3Client()
    with client.open(url, window_bytes=3 * PART) as stream:
        assert stream.raw.window_bytes == 3 * PART
    with client.open(url) as stream:
        assert stream.raw.window_bytes == client.config.read_window_bytes
    with pytest.raises(ValueError, match="window_bytes"):
        client.open(f"s3://{bucket}/other.pt", "wb", window_bytes=PART)

    windows = []
    real_open = torchdata_s3.S3Client.open

    def recording_open(self, *arguments, **keywords):  # type: ignore[no-untyped-def]
        stream = real_open(self, *arguments, **keywords)
        windows.append(stream.raw.window_bytes)
        return stream

    monkeypatch.setattr(torchdata_s3.S3Client, "open", recording_open)
    assert_same(torchdata_s3.load(url, load_window_bytes=2 * PART), state)
    assert_same(torchdata_s3.load(url), state)
    assert windows == [2 * PART, torchdata_s3.S3Config().load_window_bytes]
