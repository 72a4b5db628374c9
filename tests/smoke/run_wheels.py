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
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import boto3

from tests.s3_server import MotoServer

# The one torch build on this machine's disk is for CPython 3.11 (torch 2.13.0, CPU; numpy beside it, as users
# have it: torch warns without it); from the registry, torch for other Pythons is a CUDA build of several GB,
# which CI must not download.
TORCH_PYTHONS = {"cp311": ["torch==2.13.0", "torchdata==0.11.0", "numpy"]}
CHECK = Path(__file__).with_name("check_wheel.py")


def python_tag(wheel: Path) -> str:
    match = re.search(r"-(cp\d+)-", wheel.name)
    if not match:
        raise SystemExit(f"{wheel}: not a CPython wheel name")
    return match.group(1)


class SmokeFailed(Exception):
    """A step of a wheel's smoke test failed; the message holds everything the steps printed."""


def run(command: list[str], env: dict[str, str], cwd: Path, log: list[str]) -> None:
    log.append("+ " + " ".join(command))
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    log.append(result.stdout + result.stderr)
    if result.returncode != 0:
        raise SmokeFailed(f"exit {result.returncode}: {' '.join(command)}")


def smoke(work: Path, python: str, wheel: Path, endpoint_url: str, bucket: str) -> tuple[float, str]:
    """Returns the seconds it took and what it printed; raises SmokeFailed (with the output) on failure."""
    started = time.monotonic()
    log: list[str] = [f"== {wheel.name} with {python}"]
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
    pip_install = [str(venv / "bin/python"), "-m", "pip", "install", "--quiet", "--only-binary=:all:"]
    try:
        run([*pip_install, *packages], env, work, log)
        run([str(venv / "bin/python"), str(CHECK), bucket], env, work, log)
    except SmokeFailed as error:
        raise SmokeFailed("\n".join([*log, str(error)])) from None
    return time.monotonic() - started, "\n".join(log)


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
        for _, wheel in pairs:
            s3.create_bucket(Bucket=f"smoke-{python_tag(wheel)}")
        # Two at a time: each mostly waits on pip unpacking and on the server.
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {
                pool.submit(
                    smoke, work, python, wheel, server.endpoint_url, f"smoke-{python_tag(wheel)}"
                ): wheel
                for python, wheel in pairs
            }
            failed = []
            for future in as_completed(futures):
                try:
                    seconds, output = future.result()
                except SmokeFailed as error:
                    print(error, flush=True)
                    failed.append(futures[future].name)
                else:
                    print(output, flush=True)
                    times.append((futures[future].name, seconds))
    finally:
        server.stop()
    for name, seconds in times:
        print(f"smoke: {name} passed in {seconds:.0f} s")
    for name in failed:
        print(f"smoke: {name} FAILED (its output is above)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
