"""S3Client.delete_many: DeleteObjects batches of up to 1,000 keys, on a real S3-protocol server; and the
answers only a crafted server gives (keys S3 refused to delete)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import xml.etree.ElementTree as ET

import pytest

from tests.loopback_http import loopback_http_server
from torchdata_s3 import S3Client, S3Config, S3PermissionError

# Keys XML must escape, and one it cannot carry at all. (Line breaks, which moto cannot store, are checked
# against the crafted server below.)
ODD_KEYS = ["a&b", "<tag>", 'quote\'s "x"', "tab\there", "é/ü", "a b+c%d", "ctl\x01key"]


def test_every_key_is_deleted_in_batches_of_a_thousand(boto_s3, bucket: str, moto_server) -> None:  # type: ignore[no-untyped-def]
    keys = [f"many/{i:04d}" for i in range(1050)] + [f"odd/{k}" for k in ODD_KEYS]
    for key in keys:
        boto_s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    boto_s3.put_object(Bucket=bucket, Key="kept", Body=b"k")
    client = S3Client(S3Config.resolve())
    before = len(moto_server.logged_requests())
    client.delete_many([f"s3://{bucket}/{key}" for key in [*keys, "never/existed"]])
    sent = moto_server.logged_requests()[before:]
    left = [o["Key"] for o in boto_s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert left == ["kept"]
    assert len([line for line in sent if line.startswith("POST ") and "delete" in line]) == 2, sent
    # The one key XML cannot carry (a control character) went alone.
    assert len([line for line in sent if line.startswith("DELETE ")]) == 1, sent


def test_keys_the_server_refused_raise_typed_naming_the_first(tmp_path) -> None:  # type: ignore[no-untyped-def]
    seen: list[tuple[str, list[str]]] = []

    class Refusing(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            md5_ok = self.headers["Content-MD5"] == base64.b64encode(hashlib.md5(body).digest()).decode()
            keys = [
                k.text or "" for k in ET.fromstring(body).iter("{http://s3.amazonaws.com/doc/2006-03-01/}Key")
            ]
            seen.append((self.path, keys))
            errors = "".join(
                f"<Error><Key>{k}</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
                for k in keys
                if k.startswith("secret")
            )
            answer = f'<?xml version="1.0" encoding="UTF-8"?><DeleteResult>{errors}</DeleteResult>'.encode()
            self.send_response(200 if md5_ok else 400)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    with loopback_http_server(Refusing) as url:
        client = S3Client(S3Config.resolve(endpoint_url=url, force_path_style=True, anonymous=True))
        with pytest.raises(S3PermissionError, match=r"s3://b/secret1 failed: AccessDenied") as raised:
            client.delete_many(["s3://b/open", "s3://b/secret1", "s3://b/secret2", "s3://b/line\r\nbreak"])
    assert raised.value.url == "s3://b/secret1" and raised.value.operation == "DeleteObjects"
    assert "(and 1 other key(s) not deleted)" in str(raised.value)
    assert seen == [
        ("/b/?delete", ["open", "secret1", "secret2", "line\r\nbreak"])
    ]  # one request; \r\n intact
