"""Where credentials come from, and what happens when they are wrong or missing, against a moto server that
checks every request's signature.

What moto checks when ``INITIAL_NO_AUTH_ACTION_COUNT=0`` (read in moto/core/authorization.py and
moto/iam/access_control.py, and seen in these tests): the access key id must belong to an IAM user (or an
assumed-role session) of the server, else ``InvalidAccessKeyId``; the SigV4 signature is recomputed with that
key's real secret, else ``SignatureDoesNotMatch``; a session token must be exactly the session's, else
``InvalidToken``; then the IAM policies must allow the action, else ``AccessDenied``. So the keys used here
are made by the server's own IAM (``CreateAccessKey``, ``AssumeRole``), and a wrong secret or token really is
rejected by the server, not by a test.

Two things moto cannot do, and which are therefore not claimed here: it recomputes signatures wrongly for keys
and listing prefixes with characters that need URI-encoding, '/' in a prefix included (boto3's requests fail
the same way), so these tests use a plain key and list the whole bucket;
and an unsigned request that reaches its authorisation code (any listing, or a GET of a public object) makes
it fail with HTTP 500 (it looks up a missing Authorization header), so anonymous access is tested against the
plain server for public objects and only with a GET of a private object against this one.
"""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
import textwrap
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from tests.moto_iam import Identities, Keys, make_identities
from tests.s3_server import MotoServer
from torchdata_s3 import S3FileLister, S3FileLoader, S3PermissionError, client

pytestmark = pytest.mark.integration

BUCKET = "credentials-bucket"
KEY = "data/object.bin"
BODY = b"only for the right credentials"
PUBLIC_KEY = "public/readme.txt"
PIPES = ["lister", "loader"]
# How long a request that cannot be signed may take to fail (it never touches the network).
FAST_FAILURE_S = 5.0


@pytest.fixture(scope="module")
def authenticating_server() -> Iterator[MotoServer]:
    server = MotoServer(extra_env={"INITIAL_NO_AUTH_ACTION_COUNT": "0"})  # moto checks every signature
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def identities(authenticating_server: MotoServer) -> Identities:
    """An IAM user and an assumed-role session that may do anything, and a bucket with two objects."""
    return make_identities(authenticating_server, {BUCKET: {KEY: BODY}})


@pytest.fixture
def no_credentials(identities: Identities, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Identities:
    """The authenticating server as the environment's endpoint, and no credentials anywhere (instance
    metadata is disabled by conftest). Native clients are forgotten: each caches the credentials its
    provider chain found (for 15 minutes) and is shared by every equal configuration."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    credentials_file, config_file = tmp_path / "credentials", tmp_path / "config"
    credentials_file.write_text("")
    config_file.write_text("")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials_file))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config_file))
    monkeypatch.setenv("AWS_ENDPOINT_URL", identities.endpoint_url)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    client._forget_native_clients()
    return identities


def use(pipe: str, **options: object) -> list:
    """Lists the bucket (the URLs found) or loads the object (its bytes), with config resolved from the
    environment and `options`, as a user's pipeline would."""
    if pipe == "lister":
        return list(S3FileLister(IterableWrapper([f"s3://{BUCKET}/"]), **options))
    return [
        stream.read() for _url, stream in S3FileLoader(IterableWrapper([f"s3://{BUCKET}/{KEY}"]), **options)
    ]


def expected(pipe: str) -> list:
    return [f"s3://{BUCKET}/{KEY}"] if pipe == "lister" else [BODY]


def url_of(pipe: str) -> str:
    return f"s3://{BUCKET}/" if pipe == "lister" else f"s3://{BUCKET}/{KEY}"


def write_profiles(path: Path, profiles: dict[str, Keys], *, config_file: bool = False) -> None:
    sections = []
    for name, keys in profiles.items():
        header = f"profile {name}" if config_file and name != "default" else name
        lines = [f"[{header}]", f"aws_access_key_id = {keys.access_key_id}"]
        lines.append(f"aws_secret_access_key = {keys.secret_access_key}")
        if keys.session_token:
            lines.append(f"aws_session_token = {keys.session_token}")
        sections.append("\n".join(lines))
    path.write_text("\n\n".join(sections) + "\n")


def wrong_secret(keys: Keys) -> Keys:
    return Keys(keys.access_key_id, "wrong-" + keys.secret_access_key[6:], keys.session_token)


# --- where credentials come from ---------------------------------------------------------------------------


@pytest.mark.parametrize("pipe", PIPES)
def test_keys_from_the_environment(
    pipe: str, no_credentials: Identities, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", no_credentials.user.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", no_credentials.user.secret_access_key)
    assert use(pipe) == expected(pipe)


@pytest.mark.parametrize("pipe", PIPES)
def test_session_credentials_from_the_environment(
    pipe: str, no_credentials: Identities, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = no_credentials.session
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", session.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", session.secret_access_key)
    monkeypatch.setenv("AWS_SESSION_TOKEN", session.session_token)
    assert use(pipe) == expected(pipe)


@pytest.mark.parametrize("pipe", PIPES)
@pytest.mark.parametrize("file", ["credentials", "config"])
def test_profile_named_by_aws_profile(
    pipe: str, file: str, no_credentials: Identities, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The default profile holds a wrong secret: only the named profile can make this work.
    profiles = {"default": wrong_secret(no_credentials.user), "research": no_credentials.user}
    write_profiles(tmp_path / file, profiles, config_file=file == "config")
    monkeypatch.setenv("AWS_PROFILE", "research")
    assert use(pipe) == expected(pipe)


@pytest.mark.parametrize("pipe", PIPES)
def test_profile_option_with_session_credentials(
    pipe: str, no_credentials: Identities, tmp_path: Path
) -> None:
    write_profiles(tmp_path / "credentials", {"training": no_credentials.session})
    assert use(pipe, profile="training") == expected(pipe)


@pytest.mark.parametrize("pipe", PIPES)
def test_profile_option_wins_over_keys_in_the_environment(
    pipe: str, no_credentials: Identities, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    write_profiles(tmp_path / "credentials", {"research": no_credentials.user})
    stale = wrong_secret(no_credentials.user)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", stale.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", stale.secret_access_key)
    assert use(pipe, profile="research") == expected(pipe)


@pytest.mark.parametrize("pipe", PIPES)
def test_keys_in_the_environment_win_over_aws_profile(
    pipe: str, no_credentials: Identities, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The AWS CLI's order: AWS_PROFILE only picks the profile when the environment holds no keys.
    write_profiles(tmp_path / "credentials", {"stale": wrong_secret(no_credentials.user)})
    monkeypatch.setenv("AWS_PROFILE", "stale")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", no_credentials.user.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", no_credentials.user.secret_access_key)
    assert use(pipe) == expected(pipe)


@pytest.mark.parametrize("pipe", PIPES)
@pytest.mark.parametrize("keys", ["user", "session"])
def test_static_keys_as_options_win_over_the_environment(
    pipe: str, keys: str, no_credentials: Identities, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = wrong_secret(no_credentials.user)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", stale.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", stale.secret_access_key)
    given: Keys = getattr(no_credentials, keys)
    options = {"access_key_id": given.access_key_id, "secret_access_key": given.secret_access_key}
    if given.session_token:
        options["session_token"] = given.session_token
    assert use(pipe, **options) == expected(pipe)


# --- wrong credentials: typed errors that keep secrets out of every message, log and pickle ----------------


def assert_secret_free(error: BaseException, secrets: list[str], captured: str) -> None:
    texts = {
        "str": str(error),
        "repr": repr(error),
        "args": repr(error.args),
        "pickle": pickle.dumps(error).decode("latin-1"),
        "traceback": "".join(traceback.format_exception(type(error), error, error.__traceback__)),
        "captured logs and output": captured,
    }
    for secret in secrets:
        assert len(secret) >= 16  # long enough that finding it cannot be a coincidence
        for where, text in texts.items():
            leaked = secret in text  # a plain `secret not in text` would print the secret on failure
            assert not leaked, f"a secret appears in the {where}"


@pytest.mark.parametrize("pipe", PIPES)
@pytest.mark.parametrize("source", ["options", "environment", "profile"])
@pytest.mark.parametrize("keys", ["user", "session"])
def test_wrong_secret_is_a_permission_error_without_the_secret(
    pipe: str,
    source: str,
    keys: str,
    no_credentials: Identities,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    bad = wrong_secret(getattr(no_credentials, keys))
    options: dict[str, object] = {}
    if source == "options":
        options = {"access_key_id": bad.access_key_id, "secret_access_key": bad.secret_access_key}
        if bad.session_token:
            options["session_token"] = bad.session_token
    elif source == "environment":
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", bad.access_key_id)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", bad.secret_access_key)
        if bad.session_token:
            monkeypatch.setenv("AWS_SESSION_TOKEN", bad.session_token)
    else:
        write_profiles(tmp_path / "credentials", {"research": bad})
        options = {"profile": "research"}
    caplog.set_level(logging.DEBUG)

    with pytest.raises(S3PermissionError) as caught:
        use(pipe, **options)

    error = caught.value
    assert isinstance(error, PermissionError) and isinstance(error, OSError)
    assert (error.s3_error_code, error.http_status, error.url) == ("SignatureDoesNotMatch", 403, url_of(pipe))
    assert error.errno == 13  # EACCES
    message = str(error)
    assert url_of(pipe) in message and "SignatureDoesNotMatch (HTTP 403)" in message
    assert "the secret access key does not belong to this access key id; check the secret" in message.lower()
    captured = capfd.readouterr()
    secrets = [bad.secret_access_key, getattr(no_credentials, keys).secret_access_key]
    if bad.session_token:
        secrets.append(bad.session_token)
    assert_secret_free(error, secrets, caplog.text + captured.out + captured.err)


@pytest.mark.parametrize("pipe", PIPES)
def test_wrong_session_token_is_a_permission_error_without_the_token(
    pipe: str,
    no_credentials: Identities,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    session = no_credentials.session
    forged = session.session_token[:-8] + "AAAAAAAA"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(
        S3PermissionError, match=r"InvalidToken \(HTTP 400\).*[Rr]efresh the temporary"
    ) as caught:
        use(
            pipe,
            access_key_id=session.access_key_id,
            secret_access_key=session.secret_access_key,
            session_token=forged,
        )
    assert url_of(pipe) in str(caught.value)
    captured = capfd.readouterr()
    assert_secret_free(
        caught.value,
        [forged, session.session_token, session.secret_access_key],
        caplog.text + captured.out + captured.err,
    )


@pytest.mark.parametrize("pipe", PIPES)
def test_unknown_access_key_is_a_permission_error(pipe: str, no_credentials: Identities) -> None:
    with pytest.raises(
        S3PermissionError, match=r"InvalidAccessKeyId \(HTTP 403\).*does not know this access key"
    ):
        use(pipe, access_key_id="AKIAUNKNOWNKEY000000", secret_access_key="not-the-secret-value")


@pytest.mark.parametrize("pipe", PIPES)
@pytest.mark.parametrize("named_by", ["option", "AWS_PROFILE"])
def test_undefined_profile_is_a_clear_permission_error(
    pipe: str, named_by: str, no_credentials: Identities, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    write_profiles(tmp_path / "credentials", {"research": no_credentials.user})
    options: dict[str, object] = {"profile": "reserach"}
    if named_by == "AWS_PROFILE":
        monkeypatch.setenv("AWS_PROFILE", "reserach")
        options = {}
    started = time.monotonic()
    with pytest.raises(S3PermissionError) as caught:
        use(pipe, **options)
    assert time.monotonic() - started < FAST_FAILURE_S
    message = str(caught.value)
    assert message.startswith(
        f"{'ListObjectsV2' if pipe == 'lister' else 'GetObject'} {url_of(pipe)} failed:"
    )
    assert "profile 'reserach' is not defined" in message
    assert str(tmp_path / "credentials") in message and str(tmp_path / "config") in message
    assert caught.value.url == url_of(pipe)


@pytest.mark.parametrize("pipe", PIPES)
def test_profile_the_crt_cannot_use_is_a_clear_permission_error(
    pipe: str, no_credentials: Identities, tmp_path: Path
) -> None:
    # Defined, but its role's source profile is not: the CRT cannot even build a credentials provider.
    (tmp_path / "credentials").write_text(
        "[broken]\nrole_arn = arn:aws:iam::123456789012:role/trainer\nsource_profile = missing\n"
    )
    started = time.monotonic()
    with pytest.raises(S3PermissionError) as caught:
        use(pipe, profile="broken")
    assert time.monotonic() - started < FAST_FAILURE_S
    message = str(caught.value)
    assert f"{url_of(pipe)} failed: no credentials could be set up from the AWS profile 'broken' (" in message
    assert "Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in message
    assert (caught.value.url, caught.value.http_status) == (url_of(pipe), 0)


@pytest.mark.parametrize("pipe", PIPES)
def test_no_credentials_anywhere_fails_fast_saying_how_to_provide_them(
    pipe: str, no_credentials: Identities
) -> None:
    started = time.monotonic()
    with pytest.raises(S3PermissionError) as caught:
        use(pipe)
    assert time.monotonic() - started < FAST_FAILURE_S
    error = caught.value
    assert (error.url, error.http_status, error.crt_error) == (
        url_of(pipe),
        0,
        "AWS_AUTH_SIGNING_NO_CREDENTIALS",
    )
    message = str(error)
    assert url_of(pipe) in message and "No credentials were found" in message
    for how in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "anonymous=True"):
        assert how in message


# --- anonymous access -----------------------------------------------------------------------------------


def test_anonymous_get_is_refused_by_an_authenticating_server(no_credentials: Identities) -> None:
    # Only the loader: moto answers an unsigned listing with HTTP 500 (see the module docstring).
    with pytest.raises(
        S3PermissionError, match=rf"GetObject s3://{BUCKET}/{KEY} failed: Forbidden \(HTTP 403\)"
    ):
        use("loader", anonymous=True)


@pytest.fixture
def public_and_private(boto_s3, bucket: str) -> str:  # type: ignore[no-untyped-def]
    boto_s3.put_object(Bucket=bucket, Key=PUBLIC_KEY, Body=b"for everyone", ACL="public-read")
    boto_s3.put_object(Bucket=bucket, Key="private/secret.txt", Body=b"for the owner")
    return bucket


def test_anonymous_loader_reads_public_objects_only(
    public_and_private: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The plain server refuses unsigned GETs of objects that are not public-read, so this shows both that
    # anonymous requests carry no signature and that they read what is public.
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    bucket = public_and_private
    loaded = S3FileLoader(IterableWrapper([f"s3://{bucket}/{PUBLIC_KEY}"]), anonymous=True)
    assert [stream.read() for _url, stream in loaded] == [b"for everyone"]
    private = S3FileLoader(IterableWrapper([f"s3://{bucket}/private/secret.txt"]), anonymous=True)
    with pytest.raises(
        S3PermissionError, match=rf"s3://{bucket}/private/secret.txt failed: Forbidden \(HTTP 403\)"
    ):
        [stream.read() for _url, stream in private]


def test_anonymous_lister(public_and_private: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # moto lists any bucket for an unsigned request (it checks no bucket ACL on listings): this shows that
    # anonymous listings are sent and parsed, not that a private bucket would be refused.
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    bucket = public_and_private
    listed = list(S3FileLister(IterableWrapper([f"s3://{bucket}/public/"]), anonymous=True))
    assert listed == [f"s3://{bucket}/{PUBLIC_KEY}"]


# --- the CRT's own log --------------------------------------------------------------------------------------


def test_crt_log_never_holds_the_secret_or_the_session_token(no_credentials: Identities) -> None:
    # CRT logging is process-wide and cannot be switched off again, hence a child process.
    session = no_credentials.session
    script = textwrap.dedent(
        f"""
        from torch.utils.data.datapipes.iter import IterableWrapper
        import torchdata_s3
        from torchdata_s3 import _core
        _core.enable_crt_logging("info")
        pipe = torchdata_s3.S3FileLoader(
            IterableWrapper(["s3://{BUCKET}/{KEY}"]),
            endpoint_url={no_credentials.endpoint_url!r},
            access_key_id={session.access_key_id!r},
            secret_access_key={session.secret_access_key!r},
            session_token={session.session_token!r},
        )
        print([stream.read() for _url, stream in pipe])
        """
    )
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip() == repr([BODY])
    assert "[S3MetaRequest]" in child.stderr  # the log really was written
    leaked_secret = session.secret_access_key in child.stderr  # booleans: a failure must not print them
    leaked_token = session.session_token in child.stderr
    assert not leaked_secret, "the CRT logged the secret access key"
    assert not leaked_token, "the CRT logged the session token"


# --- the write path: the same checks, through a writer ------------------------------------------------------


@pytest.mark.parametrize("size", [100, 6 * 1024 * 1024], ids=["single-put", "multipart"])
def test_writes_with_a_wrong_secret_fail_typed_and_leave_nothing(
    size: int, no_credentials: Identities, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    import torchdata_s3

    good, bad = no_credentials.user, wrong_secret(no_credentials.user)
    url = f"s3://{BUCKET}/written/{size}.bin"
    caplog.set_level(logging.DEBUG)
    writer = torchdata_s3.open(
        url,
        "wb",
        access_key_id=bad.access_key_id,
        secret_access_key=bad.secret_access_key,
        multipart_threshold_bytes=1024 * 1024,
    )
    with pytest.raises(S3PermissionError) as caught:
        writer.write(b"w" * size)
        writer.close()
    assert caught.value.s3_error_code == "SignatureDoesNotMatch" and url in str(caught.value)
    captured = capfd.readouterr()
    assert_secret_free(
        caught.value, [bad.secret_access_key, good.secret_access_key], caplog.text + captured.out
    )

    # The right keys write it; the failed attempt left no object behind.
    signed = {"access_key_id": good.access_key_id, "secret_access_key": good.secret_access_key}
    client = torchdata_s3.S3Client(torchdata_s3.S3Config.resolve(**signed))
    with pytest.raises(torchdata_s3.S3FileNotFoundError):
        client.head(url)
    with client.open(url, "wb") as writer:
        writer.write(b"w" * size)
    assert client.head(url).size == size
    client.delete(url)
