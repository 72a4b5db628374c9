"""The README's torchdata.nodes quick start runs as written (torchdata >= 0.10), against a real S3 server."""

from __future__ import annotations

import pytest

from tests.readme import readme_example

pytestmark = pytest.mark.integration


def test_the_readme_nodes_quick_start_runs(boto_s3) -> None:  # type: ignore[no-untyped-def]
    boto_s3.create_bucket(Bucket="my-bucket")
    for index in range(4):
        boto_s3.put_object(
            Bucket="my-bucket", Key=f"train/{index}.txt", Body=f"a{index}\nb{index}\n".encode()
        )
    namespace: dict = {"__name__": "__main__"}
    exec(compile(readme_example("# quickstart_nodes.py"), "quickstart_nodes.py", "exec"), namespace)
    assert sorted(namespace["samples"]) == [(f"train/{i}.txt", [f"a{i}", f"b{i}"]) for i in range(4)]
    assert namespace["state"]
