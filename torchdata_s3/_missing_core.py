"""The message for a torchdata_s3 whose compiled extension (_core) cannot be imported."""

from __future__ import annotations

from pathlib import Path


def explain(error: ImportError) -> str:
    package = Path(__file__).resolve().parent
    compiled = list(package.glob("_core.*"))
    if not compiled and (package.parent / "pyproject.toml").is_file():
        # Python found the source checkout (the current directory comes first on sys.path) instead of the
        # installed package, and a checkout has no compiled extension.
        return (
            f"torchdata_s3 is being imported from its source tree ({package}), which has no compiled "
            "extension (_core). Run Python from another directory to use the installed package, or install "
            "the checkout in development mode (`pip install -e .`), which makes the source tree importable."
        )
    return (
        f"torchdata_s3's compiled extension (_core) could not be loaded from {package}: {error}. Reinstall "
        "torchdata-s3 for this Python (`pip install --force-reinstall torchdata-s3`, or `pip install .` "
        "from a checkout)."
    )
