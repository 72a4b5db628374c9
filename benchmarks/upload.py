"""Uploading the generated datasets to an external endpoint (``--endpoint-url ... --upload``)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.datasets import BUCKET


def upload_missing(endpoint_url: str, bucket: str, data_dir: Path, manifests: dict) -> None:
    import boto3
    from botocore.exceptions import ClientError
    from tqdm import tqdm

    s3 = boto3.client("s3", endpoint_url=endpoint_url)
    for manifest in manifests.values():
        for key, size in tqdm(list(zip(manifest.keys, manifest.sizes)), desc=f"upload {manifest.spec_name}"):
            try:
                if s3.head_object(Bucket=bucket, Key=key)["ContentLength"] == size:
                    continue
            except ClientError:
                pass
            s3.upload_file(str(data_dir / BUCKET / key), bucket, key)
