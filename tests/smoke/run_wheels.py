"""Installs each built wheel into a fresh virtual environment with no compiler on PATH and smoke-tests it
(tests/smoke/check_wheel.py) against a local S3-protocol server: what a user without a toolchain gets.

Usage: python -m tests.smoke.run_wheels WORK_DIR PYTHON WHEEL [PYTHON WHEEL ...]
  Run from the checkout with the test environment (moto, boto3). PYTHON is the interpreter the wheel is for;
  each environment is made in WORK_DIR/venv-<python tag>. Where this machine holds a CPU build of torch for
  that Python (TORCH_PYTHONS below), torch and torchdata 0.11 are installed too and every door is tested;
  elsewhere the doors that need no torch are, and the others must say that they need it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import boto3

from tests.s3_server import MotoServer

# The one torch build on this machine's disk is for CPython 3.11 (torch 2.13.0, CPU; numpy beside it, as users
# have it: torch warns without it); from the registry,
# torch for other Pythons is a CUDA build of several GB, which CI must not download.
TORCH_PYTHONS = {"cp311": ["torch==2.13.0", "torchdata==0.11.0", "numpy"]}
CHECK = Path(__file__).with_name("check_wheel.py")


def python_tag(wheel: Path) -> str:
    match = re.search(r"-(cp\d+)-", wheel.name)
    if not match:
        raise SystemExit(f"{wheel}: not a CPython wheel name")
    return match.group(1)


def run(command: list[str], env: dict[str, str], cwd: Path) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, env=env, cwd=cwd, check=True)


def smoke(work: Path, python: str, wheel: Path, endpoint_url: str, bucket: str) -> float:
    started = time.monotonic()
    tag = python_tag(wheel)
    venv = work / f"venv-{tag}"
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    # Only the environment's own programs on PATH: no compiler can be found, so nothing can be built.
    env = {
        "PATH": str(venv / "bin"),
        "HOME": os.environ.get("HOME", str(work)),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_ACCESS_KEY_ID": "smoke-access-key",
        "AWS_SECRET_ACCESS_KEY": "smoke-secret-key",
        "AWS_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(work / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(work / "no-aws-credentials"),
    }
    packages = [str(wheel), "fsspec", *TORCH_PYTHONS.get(tag, [])]
    run(
        [str(venv / "bin/python"), "-m", "pip", "install", "--quiet", "--only-binary=:all:", *packages],
        env,
        work,
    )
    run([str(venv / "bin/python"), str(CHECK), bucket], env, work)
    return time.monotonic() - started


def main(argv: list[str]) -> int:
    if len(argv) < 3 or len(argv) % 2 == 0:
        print(__doc__, file=sys.stderr)
        return 2
    work = Path(argv[0]).resolve()
    work.mkdir(parents=True, exist_ok=True)
    pairs = [(argv[i], Path(argv[i + 1]).resolve()) for i in range(1, len(argv), 2)]
    server = MotoServer()
    times = []
    try:
        s3 = boto3.client(
            "s3",
            endpoint_url=server.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="smoke-access-key",
            aws_secret_access_key="smoke-secret-key",
        )
        for python, wheel in pairs:
            bucket = f"smoke-{python_tag(wheel)}"
            s3.create_bucket(Bucket=bucket)
            print(f"== {wheel.name} with {python}", flush=True)
            times.append((wheel.name, smoke(work, python, wheel, server.endpoint_url, bucket)))
    finally:
        server.stop()
    for name, seconds in times:
        print(f"smoke: {name} passed in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
