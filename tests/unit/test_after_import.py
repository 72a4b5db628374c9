"""call_after_import: a callback once a module is first imported, the module itself untouched. Real modules
written to a temporary folder and imported by the real import system."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchdata_s3._after_import import call_after_import


@pytest.fixture
def module_folder(tmp_path: Path) -> Iterator[Path]:
    meta_path, modules = list(sys.meta_path), set(sys.modules)
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    sys.meta_path[:] = meta_path  # the watchers these tests left
    for name in set(sys.modules) - modules:
        del sys.modules[name]
    importlib.invalidate_caches()


def test_the_callback_runs_once_after_the_module_has_run(module_folder: Path) -> None:
    (module_folder / "watched_a.py").write_text("import sys\nRAN = True\n")
    seen = []
    call_after_import("watched_a", lambda: seen.append(sys.modules["watched_a"].RAN), "test")
    assert seen == []  # not imported by asking
    import watched_a  # type: ignore[import-not-found]

    assert seen == [True]
    assert type(watched_a.__loader__).__name__ == "SourceFileLoader"  # its own loader, not the watcher's
    assert watched_a.__spec__.loader is watched_a.__loader__
    importlib.reload(watched_a)
    assert seen == [True]


def test_a_module_already_imported_calls_back_at_once(module_folder: Path) -> None:
    seen = []
    call_after_import("json", lambda: seen.append(1), "test")
    assert seen == [1]


def test_a_failing_callback_warns_and_the_import_succeeds(module_folder: Path) -> None:
    (module_folder / "watched_b.py").write_text("VALUE = 7\n")

    def fail() -> None:
        raise ValueError("no luck")

    call_after_import("watched_b", fail, "do the thing")
    with pytest.warns(
        RuntimeWarning, match=r"could not do the thing after watched_b was imported: ValueError"
    ):
        import watched_b  # type: ignore[import-not-found]
    assert watched_b.VALUE == 7


def test_an_import_that_fails_calls_back_on_the_import_that_succeeds(module_folder: Path) -> None:
    source = module_folder / "watched_c.py"
    source.write_text("raise ImportError('not yet')\n")
    seen = []
    call_after_import("watched_c", lambda: seen.append(1), "test")
    with pytest.raises(ImportError, match="not yet"):
        import watched_c  # type: ignore[import-not-found]
    assert seen == []
    source.write_text("OK = 1\n")
    importlib.invalidate_caches()
    sys.modules.pop("watched_c", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        import watched_c  # type: ignore[import-not-found]
    assert seen == [1] and watched_c.OK == 1


def test_a_module_nobody_can_find_is_left_to_fail_as_usual(module_folder: Path) -> None:
    seen = []
    call_after_import("watched_missing", lambda: seen.append(1), "test")
    with pytest.raises(ModuleNotFoundError):
        import watched_missing  # type: ignore[import-not-found]  # noqa: F401
    assert seen == []
