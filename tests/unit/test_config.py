import os
import pickle
from pathlib import Path

import pytest

from torchdata_s3 import S3Config
from torchdata_s3.config import MiB, shared_file_paths, undefined_profile


def test_defaults_without_environment() -> None:
    config = S3Config.resolve(environ={})
    assert config == S3Config()
    assert config.region == "us-east-1"
    assert config.endpoint_url is None
    assert config.path_style is False
    options = config.native_options()
    assert (options["endpoint_scheme"], options["endpoint_host"], options["endpoint_port"]) == (
        "https",
        "s3.us-east-1.amazonaws.com",
        0,
    )
    assert options["credentials"] == "default"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        (
            {
                "AWS_ENDPOINT_URL_S3": "http://a:1",
                "AWS_ENDPOINT_URL": "http://b:2",
                "S3_ENDPOINT_URL": "http://c:3",
            },
            "http://a:1",
        ),
        ({"AWS_ENDPOINT_URL": "http://b:2", "S3_ENDPOINT_URL": "http://c:3"}, "http://b:2"),
        ({"S3_ENDPOINT_URL": "http://c:3"}, "http://c:3"),
        ({"S3_ENDPOINT_URL": "localhost:9000"}, "https://localhost:9000"),
        ({"S3_ENDPOINT_URL": "localhost:9000", "S3_USE_HTTPS": "0"}, "http://localhost:9000"),
        ({"S3_ENDPOINT_URL": "localhost:9000", "S3_USE_HTTPS": "true"}, "https://localhost:9000"),
    ],
)
def test_endpoint_precedence(environ: dict, expected: str) -> None:
    config = S3Config.resolve(environ=environ)
    assert config.endpoint_url == expected
    assert config.path_style is True  # a custom endpoint implies path-style


def test_explicit_beats_environment() -> None:
    environ = {"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://env:1", "AWS_PROFILE": "envprofile"}
    config = S3Config.resolve(
        environ=environ, region="ap-south-1", endpoint_url="http://arg:2", profile="argprofile"
    )
    assert (config.region, config.endpoint_url, config.profile) == (
        "ap-south-1",
        "http://arg:2",
        "argprofile",
    )


def test_region_and_profile_from_environment() -> None:
    assert S3Config.resolve(environ={"AWS_DEFAULT_REGION": "eu-central-1"}).region == "eu-central-1"
    assert S3Config.resolve(environ={"AWS_REGION": "a-1", "AWS_DEFAULT_REGION": "b-2"}).region == "a-1"
    config = S3Config.resolve(environ={"AWS_PROFILE": "research"})
    assert config.profile == "research"
    assert config.native_options()["credentials"] == "profile"


def test_virtual_hosted_endpoint_can_be_forced() -> None:
    config = S3Config.resolve(environ={}, endpoint_url="http://127.0.0.1:9000", force_path_style=False)
    assert config.path_style is False


def test_verify_ssl_from_environment() -> None:
    assert S3Config.resolve(environ={"S3_VERIFY_SSL": "0"}).verify_ssl is False
    with pytest.raises(ValueError, match="S3_VERIFY_SSL"):
        S3Config.resolve(environ={"S3_VERIFY_SSL": "maybe"})


def test_credentials_sources() -> None:
    assert S3Config(anonymous=True).native_options()["credentials"] == "anonymous"
    static = S3Config(access_key_id="AKIA", secret_access_key="secret")
    assert static.native_options()["credentials"] == "static"
    assert "secret" not in repr(static) and "AKIA" not in repr(static)
    # Keys given explicitly win over AWS_PROFILE in the environment.
    resolved = S3Config.resolve(environ={"AWS_PROFILE": "p"}, access_key_id="A", secret_access_key="S")
    assert resolved.profile is None


def test_keys_in_the_environment_win_over_aws_profile() -> None:
    # The AWS CLI's order: environment keys, then the profile AWS_PROFILE names; a profile argument wins.
    environ = {"AWS_PROFILE": "research", "AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "S"}
    from_environment = S3Config.resolve(environ=environ)
    assert from_environment.profile is None
    assert from_environment.native_options()["credentials"] == "default"
    assert S3Config.resolve(environ=environ, profile="research").native_options()["credentials"] == "profile"


def test_shared_file_paths() -> None:
    assert shared_file_paths({}) == (
        os.path.expanduser(os.path.join("~", ".aws", "credentials")),
        os.path.expanduser(os.path.join("~", ".aws", "config")),
    )
    environ = {"AWS_SHARED_CREDENTIALS_FILE": "~/creds", "AWS_CONFIG_FILE": "/etc/aws/config"}
    assert shared_file_paths(environ) == (os.path.expanduser("~/creds"), "/etc/aws/config")


def test_undefined_profile_looks_in_both_shared_files(tmp_path: Path) -> None:
    credentials, config = tmp_path / "credentials", tmp_path / "config"
    credentials.write_text("[default]\naws_access_key_id = a\n\n[ research ]\naws_access_key_id = b\n")
    config.write_text("[profile  staging]\nregion = eu-west-1\n[nightly]\n[sso-session corp]\n")
    environ = {"AWS_SHARED_CREDENTIALS_FILE": str(credentials), "AWS_CONFIG_FILE": str(config)}
    for defined in ("default", "research", "staging"):
        assert undefined_profile(defined, environ) is None
    # In the config file a profile's section is "[profile NAME]": "[nightly]", "[sso-session corp]" are not.
    for undefined in ("nightly", "corp", "reserach"):
        problem = undefined_profile(undefined, environ)
        assert problem is not None and f"profile {undefined!r} is not defined" in problem
        assert str(credentials) in problem and str(config) in problem


def test_undefined_profile_without_files(tmp_path: Path) -> None:
    environ = {
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_CONFIG_FILE": str(tmp_path / "nor"),
    }
    assert undefined_profile("default", environ) is not None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"region": ""}, "region"),
        ({"endpoint_url": "ftp://x"}, "http:// or https://"),
        ({"endpoint_url": "http://"}, "no host"),
        ({"endpoint_url": "http://h:1/path"}, "no path"),
        ({"endpoint_url": "http://h:99999"}, "invalid port"),
        ({"part_size_bytes": 1000}, "part_size_bytes"),
        ({"request_timeout_ms": 0}, "request_timeout_ms"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_connections": 0}, "max_connections"),
        ({"memory_limit_bytes": 1024}, "two parts"),
        ({"memory_limit_bytes": 255 * MiB}, "256 MiB"),
        ({"memory_limit_bytes": 256 * MiB, "part_size_bytes": 65 * MiB}, "two parts"),
        ({"access_key_id": "A"}, "together"),
        ({"anonymous": True, "profile": "p"}, "anonymous"),
        ({"throughput_target_gbps": 0}, "throughput"),
    ],
)
def test_invalid_values_are_rejected(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        S3Config(**options)


def test_unknown_option_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="part_size"):
        S3Config.resolve(environ={}, part_size=5)


def test_frozen_hashable_picklable() -> None:
    config = S3Config(endpoint_url="http://127.0.0.1:1")
    with pytest.raises(AttributeError):
        config.region = "x"  # type: ignore[misc]
    assert {config: 1}[pickle.loads(pickle.dumps(config))] == 1


def test_ipv6_endpoint() -> None:
    options = S3Config(endpoint_url="http://[::1]:9000").native_options()
    assert (options["endpoint_host"], options["endpoint_port"]) == ("[::1]", 9000)


def test_trust_comes_from_ca_file_then_aws_ca_bundle_then_the_system(tmp_path: Path) -> None:
    explicit, bundle = tmp_path / "explicit.pem", tmp_path / "bundle.pem"
    explicit.write_text("x")
    bundle.write_text("x")
    environ = {"AWS_CA_BUNDLE": str(bundle)}
    assert S3Config.resolve(environ, ca_file=str(explicit)).ca_file == str(explicit)
    assert S3Config.resolve(environ).ca_file == str(bundle)
    assert S3Config.resolve({}).ca_file is None
    assert S3Config.resolve({}).native_options()["ca_file"] == ""  # the system store
    assert S3Config.resolve({"AWS_CA_BUNDLE": " "}).ca_file is None
    with pytest.raises(ValueError, match="AWS_CA_BUNDLE="):
        S3Config.resolve({"AWS_CA_BUNDLE": str(tmp_path / "missing.pem")})
    # verify_ssl is independent of where the CAs come from.
    assert S3Config.resolve({**environ, "S3_VERIFY_SSL": "0"}).native_options()["verify_tls"] is False


HTTPS_ENDPOINT = "https://store.example:8443"
HTTP_ENDPOINT = "http://store.example:8080"


@pytest.mark.parametrize(
    ("environ", "endpoint", "expected"),
    [
        ({}, HTTPS_ENDPOINT, None),
        ({"HTTPS_PROXY": "http://p:3128"}, HTTPS_ENDPOINT, "http://p:3128"),
        ({"https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:2"}, HTTPS_ENDPOINT, "http://low:1"),
        ({"HTTP_PROXY": "http://p:3128"}, HTTPS_ENDPOINT, None),
        ({"HTTP_PROXY": "http://p:3128"}, HTTP_ENDPOINT, "http://p:3128"),
        ({"HTTPS_PROXY": "http://p:3128"}, HTTP_ENDPOINT, None),
        ({"HTTPS_PROXY": "p:3128", "NO_PROXY": "store.example"}, HTTPS_ENDPOINT, None),
        ({"HTTPS_PROXY": "p:3128", "NO_PROXY": ".example"}, HTTPS_ENDPOINT, None),
        ({"HTTPS_PROXY": "p:3128", "no_proxy": "*"}, HTTPS_ENDPOINT, None),
        ({"HTTPS_PROXY": "p:3128", "NO_PROXY": "other.example"}, HTTPS_ENDPOINT, "p:3128"),
        ({"HTTPS_PROXY": "p:3128", "NO_PROXY": ".amazonaws.com"}, None, None),
        ({"HTTPS_PROXY": "p:3128"}, None, "p:3128"),
    ],
)
def test_proxy_from_environment_as_the_aws_cli(environ: dict, endpoint: str, expected: str) -> None:
    assert S3Config.resolve(environ, endpoint_url=endpoint).proxy_url == expected


def test_proxy_options_and_explicit_no_proxy() -> None:
    environ = {"HTTPS_PROXY": "http://user:p%40ss@proxy.example:3128"}
    config = S3Config.resolve(environ, endpoint_url=HTTPS_ENDPOINT)
    options = config.native_options()
    assert (options["proxy_host"], options["proxy_port"]) == ("proxy.example", 3128)
    assert (options["proxy_username"], options["proxy_password"]) == ("user", "p@ss")
    assert "p%40ss" not in repr(config)
    assert (
        S3Config.resolve(environ, endpoint_url=HTTPS_ENDPOINT, proxy_url="").native_options()["proxy_host"]
        == ""
    )
    assert S3Config.resolve({"HTTPS_PROXY": "proxy.example"}).native_options()["proxy_port"] == 80


def test_an_https_proxy_url_is_refused_without_showing_its_password() -> None:
    with pytest.raises(ValueError, match="only http:// proxies") as caught:
        S3Config.resolve({}, proxy_url="https://user:secret@proxy.example:3128")
    assert "secret" not in str(caught.value)


def test_retries_from_the_environment_as_the_aws_cli_reads_them() -> None:
    assert S3Config.resolve({"AWS_MAX_ATTEMPTS": "3"}).max_retries == 2
    assert S3Config.resolve({"AWS_MAX_ATTEMPTS": "1"}).max_retries == 0
    assert S3Config.resolve({"AWS_MAX_ATTEMPTS": "3"}, max_retries=7).max_retries == 7  # an argument wins
    assert S3Config.resolve({"AWS_RETRY_MODE": "adaptive"}).adaptive_rate is True
    assert S3Config.resolve({"AWS_RETRY_MODE": "Standard"}).adaptive_rate is False
    assert S3Config.resolve({"AWS_RETRY_MODE": "legacy"}, adaptive_rate=True).adaptive_rate is True
    assert S3Config.resolve({}).adaptive_rate is True
    with pytest.raises(ValueError, match="AWS_MAX_ATTEMPTS='0'"):
        S3Config.resolve({"AWS_MAX_ATTEMPTS": "0"})
    with pytest.raises(ValueError, match="AWS_RETRY_MODE='fast'"):
        S3Config.resolve({"AWS_RETRY_MODE": "fast"})
