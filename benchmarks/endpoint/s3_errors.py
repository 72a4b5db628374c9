"""S3's XML error documents, shared by the listing sidecar and the nginx configuration."""

from __future__ import annotations

from typing import Optional
from xml.sax.saxutils import escape


def s3_error_document(code: str, message: str, resource: Optional[str] = None) -> str:
    """``<Error><Code>..</Code><Message>..</Message>[<Resource>..</Resource>]</Error>``, XML-escaped,
    behind an XML declaration, as S3 sends it."""
    resource_element = f"<Resource>{escape(resource)}</Resource>" if resource is not None else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message>{resource_element}</Error>"
    )


NO_SUCH_KEY_DOCUMENT = s3_error_document("NoSuchKey", "The specified key does not exist.")
"""What a GET or HEAD of a missing object answers (with status 404) on the local endpoint."""


class S3Error(Exception):
    """A request the endpoint refuses, answered with ``status`` and S3's error document for ``code``."""

    def __init__(self, status: int, code: str, message: str, resource: Optional[str] = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.resource = status, code, message, resource

    def document(self) -> bytes:
        return s3_error_document(self.code, self.message, self.resource).encode("utf-8")
