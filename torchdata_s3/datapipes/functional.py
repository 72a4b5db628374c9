"""The functional names ``list_files_by_s3``, ``load_files_by_s3`` and ``save_by_s3`` on torch's IterDataPipe.

torchdata <= 0.9 registers the same two names for its own S3 DataPipes when ``torchdata.datapipes`` is
imported, and torch raises on a second registration of a name. So that both import orders work and the
names always mean ours once torchdata_s3 is imported:

- names already taken by torchdata are re-pointed at our classes;
- later registrations of these two names by other classes are ignored (torchdata's classes stay importable
  under their own names, e.g. ``torchdata.datapipes.iter.S3FileLoader``).

``readlines`` is the opposite case: it belongs to torchdata. Where nothing provides it we register our
LineReader, and any later registration (torchdata's) replaces ours instead of failing.

This wraps torch's ``IterDataPipe.register_datapipe_as_function`` classmethod; nothing else is changed.
"""

from __future__ import annotations

from torch.utils.data.datapipes.datapipe import IterDataPipe

from .lines import LineReader
from .lister import S3FileLister
from .loader import S3FileLoader
from .saver import S3FileSaver

FUNCTIONAL_NAMES = {
    "list_files_by_s3": S3FileLister,
    "load_files_by_s3": S3FileLoader,
    "save_by_s3": S3FileSaver,
}
FALLBACK_NAMES = {"readlines": LineReader}


def _guarded_register(original):  # type: ignore[no-untyped-def]
    def register_datapipe_as_function(cls, function_name, cls_to_register, enable_df_api_tracing=False):  # type: ignore[no-untyped-def]
        ours = FUNCTIONAL_NAMES.get(function_name)
        if ours is not None and cls_to_register is not ours:
            return None  # keep torchdata_s3's DataPipe under this name
        fallback = FALLBACK_NAMES.get(function_name)
        if (
            fallback is not None
            and cls_to_register is not fallback
            and _registered_class(function_name) is fallback
        ):
            IterDataPipe.functions.pop(function_name)  # the real owner arrived: make way
        return original(function_name, cls_to_register, enable_df_api_tracing)

    register_datapipe_as_function._torchdata_s3_guard = True  # type: ignore[attr-defined]
    return classmethod(register_datapipe_as_function)


def _registered_class(function_name: str) -> object:
    function = IterDataPipe.functions.get(function_name)
    arguments = getattr(function, "args", ())  # torch registers functools.partial(f, cls, ...)
    return arguments[0] if arguments else None


def install() -> None:
    """Registers our functional names; idempotent."""
    current = IterDataPipe.register_datapipe_as_function
    if not getattr(current, "_torchdata_s3_guard", False):
        # Replacing torch's classmethod is the point: see _guarded_register.
        IterDataPipe.register_datapipe_as_function = _guarded_register(current)  # type: ignore[method-assign]
    for name, cls in FUNCTIONAL_NAMES.items():
        IterDataPipe.functions.pop(name, None)
        IterDataPipe.register_datapipe_as_function(name, cls)
    for name, cls in FALLBACK_NAMES.items():
        if name not in IterDataPipe.functions:
            IterDataPipe.register_datapipe_as_function(name, cls)
