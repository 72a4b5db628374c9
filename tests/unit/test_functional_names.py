"""list_files_by_s3 / load_files_by_s3 mean ours whichever of torchdata and torchdata_s3 is imported first."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CHECK = """
import warnings
warnings.simplefilter("ignore")
from torch.utils.data.datapipes.datapipe import IterDataPipe
from torch.utils.data.datapipes.iter import IterableWrapper
{imports}
import torchdata_s3
pipe = IterableWrapper(["s3://bucket/prefix/"])
assert type(pipe.list_files_by_s3()) is torchdata_s3.S3FileLister, type(pipe.list_files_by_s3())
assert isinstance(pipe.load_files_by_s3(), torchdata_s3.S3FileLoader)
assert hasattr(pipe, "readlines")
print(IterDataPipe.functions["readlines"].args[0].__module__)
"""


def run(imports: str) -> str:
    code = textwrap.dedent(CHECK.format(imports=imports))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


def test_without_torchdata() -> None:
    assert run("import sys; sys.modules['torchdata'] = None") == "torchdata_s3.datapipes.lines"


def test_torchdata_imported_first() -> None:
    assert run("import torchdata.datapipes").startswith("torchdata.")


@pytest.mark.parametrize(
    "later", ["import torchdata.datapipes", "from torchdata.datapipes.iter import S3FileLoader"]
)
def test_torchdata_imported_after(later: str) -> None:
    code = (
        textwrap.dedent(CHECK.format(imports=""))
        + f"\n{later}\n"
        + textwrap.dedent(
            """
        assert type(pipe.list_files_by_s3()) is torchdata_s3.S3FileLister
        assert isinstance(pipe.load_files_by_s3(), torchdata_s3.S3FileLoader)
        print(IterDataPipe.functions["readlines"].args[0].__module__)
        """
        )
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    first, second = result.stdout.split()
    assert first == "torchdata_s3.datapipes.lines"
    assert second.startswith("torchdata.")  # torchdata's own LineReader took its name back
