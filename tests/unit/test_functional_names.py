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


def run_fresh(code: str) -> str:
    """`code` in a fresh interpreter, where a RuntimeWarning (what a failed registration gives) is an error;
    its output."""
    result = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


def run(imports: str) -> str:
    return run_fresh(textwrap.dedent(CHECK.format(imports=imports)))


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
    first, second = run_fresh(code).split()
    assert first == "torchdata_s3.datapipes.lines"
    assert second.startswith("torchdata.")  # torchdata's own LineReader took its name back


NAMES_REGISTERED = """
from torch.utils.data.datapipes.iter import IterableWrapper
import torchdata_s3
pipe = IterableWrapper(["s3://bucket/prefix/"])
assert type(pipe.list_files_by_s3()) is torchdata_s3.S3FileLister, type(pipe.list_files_by_s3())
assert isinstance(pipe.load_files_by_s3(), torchdata_s3.S3FileLoader)
assert type(pipe.save_by_s3()) is torchdata_s3.S3FileSaver
"""


def test_importing_the_package_imports_no_torch_and_torch_imported_later_gets_the_names() -> None:
    code = 'import sys, torchdata_s3\nprint("torch" in sys.modules, "S3FileLoader" in dir(torchdata_s3))\n'
    assert run_fresh(code + NAMES_REGISTERED) == "False True"


@pytest.mark.parametrize(
    "first",
    [
        "import torchdata_s3.datapipes.loader",
        "from torchdata_s3.datapipes.lister import S3FileLister",
        "from torchdata_s3 import S3FileLoader",
        "import torchdata_s3.datasets",
        "from torchdata_s3 import S3IterableDataset",
        "import torchdata_s3.checkpoint",
        "from torchdata_s3 import load",
        "import torchdata_s3.distributed",
        "import torchdata_s3.dcp",
        "import torchdata_s3.fsspec",
        "import torchdata_s3, torchdata.datapipes",
    ],
)
def test_whichever_module_of_ours_imports_torch_first_the_names_are_registered(first: str) -> None:
    # A module of ours that imports torch is half-imported when torch's import registers the names, which
    # imports the DataPipes: none of them may be the half-imported one.
    run_fresh(f"{first}\n{NAMES_REGISTERED}")
