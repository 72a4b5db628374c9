"""Checkpoints on S3: ``torch.save`` / ``torch.load`` of one object (:mod:`.torch_save`), and
``torch.distributed.checkpoint`` storage (:mod:`.dcp`, imported on first use: it loads
torch.distributed.checkpoint, which takes seconds)."""

from .torch_save import load, save

__all__ = ["load", "save"]
