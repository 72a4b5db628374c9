"""Running code once a module is first imported, without importing it.

``import torchdata_s3`` does not import torch: that takes seconds and hundreds of MiB, which users of the
client, ``open()`` and the fsspec filesystem (pandas, pyarrow) should not pay, and it makes every later
``gc.collect()`` slower. Yet the DataPipes' functional names (``load_files_by_s3``...) must be on torch's
IterDataPipe whichever of torch, torchdata and torchdata_s3 a program imports first. A finder at the front
of ``sys.meta_path`` notices the first import of the module and runs the callback right after the module
has executed. It changes nothing about what is imported: the module gets its own loader back before it runs.
"""

from __future__ import annotations

import importlib.abc
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Callable, Optional


def call_after_import(name: str, callback: Callable[[], None], purpose: str) -> None:
    """Calls ``callback()`` once the top-level module ``name`` is imported: now if it already is, else right
    after its first import finishes. The callback's exceptions become a warning naming ``purpose``, so that a
    failure of ours never fails the program's own ``import``."""
    if sys.modules.get(name) is not None:
        _call(callback, name, purpose)
    else:
        sys.meta_path.insert(0, _ImportWatcher(name, callback, purpose))


def _call(callback: Callable[[], None], name: str, purpose: str) -> None:
    try:
        callback()
    except Exception as error:
        warnings.warn(
            f"torchdata_s3 could not {purpose} after {name} was imported: {error!r}",
            RuntimeWarning,
            stacklevel=3,
        )


class _ImportWatcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for its module it asks the finders behind it and hands back their spec with a
    loader that calls back once the module has run. Inert once that has happened (it stays in
    ``sys.meta_path``: removing an entry while another thread walks the list could make that thread skip a
    finder)."""

    def __init__(self, name: str, callback: Callable[[], None], purpose: str) -> None:
        self._name = name
        self._callback = callback
        self._purpose = purpose
        self._done = False

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[ModuleSpec]:
        # Imports of one module are serialised by the import system's per-module lock, so two threads
        # importing it cannot both get here before the first has finished.
        if fullname != self._name or self._done:
            return None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None:  # a namespace package: nothing runs, nothing to wait for
            return spec
        spec.loader = _CallAfterExec(spec.loader, self)
        return spec

    def executed(self) -> None:
        self._done = True
        _call(self._callback, self._name, self._purpose)


class _CallAfterExec(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, watcher: _ImportWatcher) -> None:
        self._loader = loader
        self._watcher = watcher

    def create_module(self, spec: ModuleSpec) -> Optional[ModuleType]:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # The module never sees this wrapper: its own loader, as without torchdata_s3.
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        module.__loader__ = self._loader
        self._loader.exec_module(module)  # an import that fails leaves the watcher waiting for a retry
        self._watcher.executed()
