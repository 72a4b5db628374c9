"""``torch.distributed.checkpoint`` on S3: :class:`S3StorageWriter` and :class:`S3StorageReader`.

A checkpoint is a prefix, ``s3://bucket/path/to/checkpoint``: each rank writes its shards as
``<prefix>/__<rank>_<save>_<n>.distcp`` objects, and the coordinator writes ``<prefix>/.metadata`` last.

What "nothing half-written is visible" means here. S3 has no rename, so every object is written under its
final name; each one appears whole or not at all (a writer commits on ``close()`` and aborts on failure).
A checkpoint is complete exactly when its ``.metadata`` exists, and that object is written only after every
rank's data is committed. Data objects carry the save's id in their names, so saving again to the same
prefix never touches the objects the current ``.metadata`` names: until the new ``.metadata`` replaces it
(one PUT), a reader loads the old checkpoint intact; afterwards, the new one. Once the new ``.metadata`` is
committed, the coordinator deletes the ``.distcp`` objects directly under the prefix that it does not name
(the replaced checkpoint's, and those a failed save left). A failed save leaves no ``.metadata``, and
:class:`S3StorageReader` refuses such a prefix with an error saying so. Two saves running at once into
the same prefix are not supported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import pickle
import threading
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, Union

from torch.distributed._shard._utils import narrow_tensor_by_index
from torch.distributed.checkpoint.filesystem import (
    CURRENT_DCP_VERSION,
    DEFAULT_SUFFIX,
    FileSystemReader,
    FileSystemWriter,
    _StorageInfo,
    _StoragePrefix,
)
from torch.distributed.checkpoint.metadata import Metadata
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, LoadPlanner, SavePlan, SavePlanner
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from ..client import S3Client
from ..config import S3Config
from ..errors import S3Error, S3FileNotFoundError, S3ObjectExistsError
from ..options import config_from_arguments
from ..url import parse_s3_url
from ..writer import CHECKSUM_ALGORITHMS
from .dcp_filesystem import S3FileSystem, checkpoint_url
from .torch_save import torch_load

__all__ = ["S3StorageReader", "S3StorageWriter"]

METADATA_NAME = ".metadata"  # torch's name for a checkpoint's metadata file
# Objects (files) a rank writes, or reads, at once. Each object's parts already move in parallel; a second
# object lets one be serialized by torch while the other is on the wire.
THREAD_COUNT = 2


class S3StorageWriter(FileSystemWriter):
    """Writes a ``torch.distributed.checkpoint`` checkpoint under an S3 prefix:
    ``dcp.save(state_dict, storage_writer=S3StorageWriter("s3://bucket/checkpoints/step-100"))``.

    Every rank uploads its own shards, `thread_count` objects at a time, each as a streamed (multipart)
    upload with its parts in parallel; each writer holds at most about ``multipart_threshold_bytes +
    part_size_bytes + write_window_bytes`` (see :mod:`torchdata_s3.writer`), beside the state dict itself.
    The coordinator writes ``.metadata`` once every rank's objects are committed (see the module docstring).

    Args:
        url: the checkpoint's prefix, ``s3://bucket/path`` (a trailing ``/`` is ignored).
        config: the S3 configuration [None: :meth:`S3Config.resolve` from the environment].
        thread_count: objects each rank writes at once; with `single_file_per_rank`, also how many objects
            each rank's shards are split into [2].
        single_file_per_rank: one object per rank and thread instead of one per tensor [True].
        overwrite: replace a checkpoint already at `url` [True]. False refuses one with
            S3ObjectExistsError, before anything is written and again when ``.metadata`` is committed.
        checksum: end-to-end checksum the server verifies for every object, ``"crc32c"`` or ``"crc64nvme"``
            [None].
        **options: :class:`S3Config` fields (``endpoint_url=``, ``region=``, ...).

    Raises:
        InvalidS3UrlError: `url` is not an ``s3://`` URL string. ValueError: an unknown `checksum`.
    """

    # torch's base class types `fs` as its local FileSystem; ours is the S3 one, which it only calls through
    # FileSystemBase's methods, and which this class also uses for what only it has.
    fs: S3FileSystem  # type: ignore[assignment]
    path: str  # the checkpoint's prefix URL (torch's: any path)

    def __init__(
        self,
        url: str,
        *,
        config: Optional[S3Config] = None,
        thread_count: int = THREAD_COUNT,
        single_file_per_rank: bool = True,
        overwrite: bool = True,
        checksum: Optional[str] = None,
        **options: Any,
    ) -> None:
        prefix = checkpoint_url(url)
        if checksum is not None and checksum not in CHECKSUM_ALGORITHMS:
            raise ValueError(f"checksum must be None or one of {CHECKSUM_ALGORITHMS}, got {checksum!r}")
        # sync_files: an S3 object is durable once its writer's close() returns; torch would call os.sync().
        super().__init__(
            prefix,
            single_file_per_rank=single_file_per_rank,
            sync_files=False,
            thread_count=thread_count,
            overwrite=overwrite,
        )
        self.fs = S3FileSystem(S3Client(config_from_arguments(config, **options)), checksum=checksum)
        self.path = prefix

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Union[str, os.PathLike]) -> bool:
        return S3FileSystem.validate_checkpoint_id(checkpoint_id)

    def _metadata_url(self) -> str:
        name = METADATA_NAME if self.use_collectives or self.rank is None else f"__{self.rank}{METADATA_NAME}"
        return self.fs.concat_path(self.path, name)

    def _data_prefix(self, rank: int) -> _StoragePrefix:
        # The save's id in every data object's name: a new save never overwrites the objects that the
        # checkpoint it replaces still names.
        return _StoragePrefix(f"__{rank}_{self.save_id.replace('-', '')[:12]}_")

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        if not self.overwrite and self.fs.exists(self._metadata_url()):
            raise _checkpoint_exists(self.path, self._metadata_url())
        if self.rank is not None and not self.use_collectives:
            plan = dataclasses.replace(plan, storage_data=self._data_prefix(self.rank))
        return plan

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        return [
            plan
            if plan.storage_data is not None
            else dataclasses.replace(plan, storage_data=self._data_prefix(i))
            for i, plan in enumerate(plans)
        ]

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        self.fs.start_writes()
        try:
            written = super().write_data(plan, planner)
            if self.fs.write_failures:  # in one of torch's writer threads, which keep their exceptions
                raise self.fs.write_failures[0]
        except BaseException:
            # The save has failed: no .metadata will name its objects; delete this rank's now.
            self._delete_quietly(self.fs.abandon_writes())
            raise
        return written

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        storage_data = {result.index: result.storage_data for rank in results for result in rank}
        metadata.version = CURRENT_DCP_VERSION
        metadata.storage_data = storage_data
        metadata.storage_meta = self.storage_meta()
        ours = {self.fs.concat_path(self.path, info.relative_path) for info in storage_data.values()}
        try:
            with self.fs.client.open(
                self._metadata_url(), "wb", overwrite=self.overwrite, checksum=self.fs.checksum
            ) as stream:
                pickle.dump(metadata, stream)
        except BaseException:
            self._delete_quietly(ours)
            raise
        if self.use_collectives:  # one coordinator for the whole checkpoint: the only one to clean up
            self._delete_unnamed_data(ours)

    def _delete_unnamed_data(self, named: set[str]) -> None:
        """Deletes the ``.distcp`` objects directly under the prefix that the new ``.metadata`` does not
        name."""
        prefix = self.fs.concat_path(self.path, "")
        for listed in self.fs.client.list_objects(prefix, delimiter="/"):
            url = f"s3://{parse_s3_url(prefix).bucket}/{listed.key}"
            if url.endswith(DEFAULT_SUFFIX) and url not in named:
                self.fs.rm_file(url)

    def _delete_quietly(self, urls: Sequence[str] | set[str]) -> None:
        # The failure being raised matters more than one of these; what stays is deleted by the next save.
        for url in list(urls):
            with contextlib.suppress(S3Error):
                self.fs.rm_file(url)


class S3StorageReader(FileSystemReader):
    """Reads a ``torch.distributed.checkpoint`` checkpoint from an S3 prefix:
    ``dcp.load(state_dict, storage_reader=S3StorageReader("s3://bucket/checkpoints/step-100"))``, onto any
    number of ranks (each reads only the byte ranges of the shards it needs).

    Each rank reads `thread_count` objects at once, each through a seekable stream that fetches what is
    read (parallel ranged GETs, at most ``read_window_bytes`` ahead), items in the order of their offsets,
    each item's record read whole into memory before ``torch.load`` (one record at a time per thread).

    Args:
        url: the checkpoint's prefix, ``s3://bucket/path`` (a trailing ``/`` is ignored).
        config: the S3 configuration [None: :meth:`S3Config.resolve` from the environment].
        thread_count: objects each rank reads at once [2].
        **options: :class:`S3Config` fields (``endpoint_url=``, ``region=``, ...).

    Raises:
        InvalidS3UrlError: `url` is not an ``s3://`` URL string. At load: S3FileNotFoundError naming the
        prefix when it holds no complete checkpoint (no ``.metadata``).
    """

    # torch's base class types `fs` as its local FileSystem; ours is the S3 one, which it only calls through
    # FileSystemBase's methods, and which this class also uses for what only it has.
    fs: S3FileSystem  # type: ignore[assignment]
    path: str  # the checkpoint's prefix URL (torch's: any path)

    def __init__(
        self, url: str, *, config: Optional[S3Config] = None, thread_count: int = THREAD_COUNT, **options: Any
    ) -> None:
        prefix = checkpoint_url(url)
        super().__init__(prefix)
        self.fs = S3FileSystem(S3Client(config_from_arguments(config, **options)))
        self.path = prefix
        self.thread_count = thread_count

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Union[str, os.PathLike]) -> bool:
        return S3FileSystem.validate_checkpoint_id(checkpoint_id)

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        try:
            return super().read_metadata(*args, **kwargs)
        except S3FileNotFoundError as missing:
            if missing.s3_error_code == "NoSuchBucket":
                raise
            raise _incomplete_checkpoint(self.path, missing) from None

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        by_object: dict[str, list] = defaultdict(list)
        for item in plan.items:
            by_object[self.storage_data[item.storage_index].relative_path].append(item)
        planner_lock = threading.Lock()  # torch's planners are not documented as thread-safe
        workers = max(1, min(self.thread_count, len(by_object)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="torchdata_s3-dcp-read") as pool:
            reads = [
                pool.submit(self._read_object, relative_path, items, planner, planner_lock)
                for relative_path, items in by_object.items()
            ]
            for read in reads:
                read.result()
        done: Future[None] = Future()
        done.set_result(None)
        return done

    def _read_object(
        self, relative_path: str, items: list, planner: LoadPlanner, planner_lock: threading.Lock
    ) -> None:
        infos: dict[Any, _StorageInfo] = {
            item.storage_index: self.storage_data[item.storage_index] for item in items
        }
        # In offset order, so that the stream reads forward and its read-ahead is used.
        items = sorted(items, key=lambda item: infos[item.storage_index].offset)
        with self.fs.create_stream(self.fs.concat_path(self.path, relative_path), "rb") as stream:
            for item in items:
                info = infos[item.storage_index]
                piece = self.transforms.transform_load_stream(
                    item, info.transform_descriptors or (), self._slice_file(stream, info)
                )
                if item.type == LoadItemType.BYTE_IO:
                    data = io.BytesIO(piece.read())
                    with planner_lock:
                        planner.load_bytes(item, data)
                    continue
                # Read in order, then loaded from memory: torch.load reads a record's zip directory at its end
                # before its start, and on the object's stream that jump skipped through the record (read
                # ahead, not kept past a part) and fetched it again: twice the bytes (measured, dcp
                # workload). Memory: one record at a time beside the tensor it becomes.
                saved = torch_load(io.BytesIO(piece.read()), map_location="cpu", weights_only=True)
                wanted = narrow_tensor_by_index(saved, item.storage_offsets, item.lengths)
                with planner_lock:
                    target = planner.resolve_tensor(item).detach()
                # torch's planner refuses other sizes before anything is read; this keeps copy_() from
                # broadcasting should a checkpoint's own records disagree.
                if target.size() != wanted.size():
                    raise ValueError(
                        f"{self.fs.concat_path(self.path, relative_path)}: {item.storage_index.fqn} has size "
                        f"{tuple(wanted.size())} in the checkpoint, {tuple(target.size())} in the state dict"
                    )
                target.copy_(wanted)
                with planner_lock:
                    planner.commit_tensor(item, target)


def _checkpoint_exists(prefix: str, metadata_url: str) -> S3ObjectExistsError:
    return S3ObjectExistsError(
        f"PutObject {metadata_url} refused: a checkpoint already exists at {prefix} and overwrite=False. "
        "Save to another prefix, delete that checkpoint, or pass overwrite=True to replace it.",
        url=metadata_url,
        operation="PutObject",
    )


def _incomplete_checkpoint(prefix: str, missing: S3FileNotFoundError) -> S3FileNotFoundError:
    metadata_url = missing.url
    return S3FileNotFoundError(
        f"GetObject {metadata_url} failed: {prefix} holds no complete checkpoint (no {METADATA_NAME}; a save "
        "that failed or is still running leaves none). Check the prefix, or save the checkpoint again.",
        url=metadata_url,
        operation=missing.operation or "GetObject",
        http_status=missing.http_status,
        s3_error_code=missing.s3_error_code,
        crt_error=missing.crt_error,
    )
