"""IAM identities on a moto server that checks every signature (``INITIAL_NO_AUTH_ACTION_COUNT=0``): what
tests/integration/test_credentials.py says moto checks, made by the server's own IAM and STS."""

from __future__ import annotations

import json
import threading
import urllib.request
from dataclasses import dataclass
from typing import Callable

import boto3

from tests.s3_server import MotoServer

ALLOW_EVERYTHING = json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
)


@dataclass(frozen=True)
class Keys:
    access_key_id: str
    secret_access_key: str
    session_token: str = ""


@dataclass(frozen=True)
class Identities:
    endpoint_url: str
    user: Keys  # an IAM user's long-term key pair
    session: Keys  # temporary credentials of an assumed role


def set_signature_checks(server: MotoServer, enforced: bool) -> None:
    # moto's /moto-api/reset-auth sets how many requests may pass unauthenticated from now on.
    count = "0" if enforced else "1000000"
    request = urllib.request.Request(
        f"{server.endpoint_url}/moto-api/reset-auth",
        data=count.encode(),
        method="POST",
        headers={"Content-Type": "text/plain"},  # a form content type would hide the body from moto
    )
    urllib.request.urlopen(request, timeout=10).close()


def make_identities(server: MotoServer, buckets: dict[str, dict[str, bytes]]) -> Identities:
    """An IAM user "reader" and a session of the role "trainer", both allowed everything, and `buckets`
    with their objects."""
    set_signature_checks(server, enforced=False)  # the first key pair can only be made unauthenticated
    try:
        arrange = {
            "endpoint_url": server.endpoint_url,
            "region_name": "us-east-1",
            "aws_access_key_id": "arranging",
            "aws_secret_access_key": "arranging",
        }
        iam = boto3.client("iam", **arrange)
        iam.create_user(UserName="reader")
        iam.put_user_policy(UserName="reader", PolicyName="everything", PolicyDocument=ALLOW_EVERYTHING)
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        trust = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
        }
        role = iam.create_role(RoleName="trainer", AssumeRolePolicyDocument=json.dumps(trust))["Role"]
        iam.put_role_policy(RoleName="trainer", PolicyName="everything", PolicyDocument=ALLOW_EVERYTHING)
        session = boto3.client("sts", **arrange).assume_role(RoleArn=role["Arn"], RoleSessionName="training")
        s3 = boto3.client("s3", **arrange)
        for bucket, objects in buckets.items():
            s3.create_bucket(Bucket=bucket)
            for name, body in objects.items():
                s3.put_object(Bucket=bucket, Key=name, Body=body)
    finally:
        set_signature_checks(server, enforced=True)
    temporary = session["Credentials"]
    return Identities(
        endpoint_url=server.endpoint_url,
        user=Keys(key["AccessKeyId"], key["SecretAccessKey"]),
        session=Keys(temporary["AccessKeyId"], temporary["SecretAccessKey"], temporary["SessionToken"]),
    )


def user_client(identities: Identities, service: str):  # type: ignore[no-untyped-def]
    """A boto3 client of `service` on the server, signing with the IAM user's keys."""
    return boto3.client(
        service,
        endpoint_url=identities.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id=identities.user.access_key_id,
        aws_secret_access_key=identities.user.secret_access_key,
    )


def sts_sessions(identities: Identities) -> Callable[[], tuple[str, str, str]]:
    """A new session of the server's role "trainer" per call, asked for with the IAM user's keys."""
    sts = user_client(identities, "sts")
    role_arn = f"arn:aws:iam::{sts.get_caller_identity()['Account']}:role/trainer"
    lock = threading.Lock()

    def issue() -> tuple[str, str, str]:
        with lock:
            session = sts.assume_role(RoleArn=role_arn, RoleSessionName="rotating")["Credentials"]
        return session["AccessKeyId"], session["SecretAccessKey"], session["SessionToken"]

    return issue
