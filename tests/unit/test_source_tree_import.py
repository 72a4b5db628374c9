"""Importing torchdata_s3 from a source checkout that has no compiled extension says so and what to do,
instead of CPython's 'partially initialized module ... circular import'."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import torchdata_s3

PACKAGE = Path(torchdata_s3.__file__).resolve().parent


def import_from(directory: Path) -> subprocess.CompletedProcess:
    # The development install's import hook would find the real package; without it, as after a plain
    # `pip install .`, the current directory's torchdata_s3/ comes first on sys.path.
    code = textwrap.dedent(
        """
        import sys
        sys.meta_path = [f for f in sys.meta_path if "editable" not in type(f).__module__]
        import torchdata_s3
        """
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
    )


def copy_sources(root: Path, with_pyproject: bool) -> None:
    shutil.copytree(PACKAGE, root / "torchdata_s3", ignore=shutil.ignore_patterns("_core.*", "__pycache__"))
    if with_pyproject:
        (root / "pyproject.toml").write_text("[project]\nname = 'torchdata-s3'\n")


def test_a_source_checkout_without_the_extension_names_the_problem(tmp_path: Path) -> None:
    copy_sources(tmp_path, with_pyproject=True)
    result = import_from(tmp_path)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "circular import" not in last
    assert "imported from its source tree" in last and "pip install -e ." in last, last


def test_a_package_without_its_extension_says_to_reinstall(tmp_path: Path) -> None:
    copy_sources(tmp_path, with_pyproject=False)
    result = import_from(tmp_path)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "compiled extension (_core) could not be loaded" in last and "Reinstall" in last, last
