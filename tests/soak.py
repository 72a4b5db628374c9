"""The soak (issue 25): the DataLoader, writer and checkpoint paths together, for minutes, under random
faults, throttling and credentials that rotate every few seconds, against a signature-checking moto on
loopback.

    python -m tests.soak [--minutes 10] [--output build/soak]      (scripts/soak.sh runs it)

What runs at once: a 2-worker DataLoader (persistent workers) reading every object of a bucket each epoch and
checking each against its digest; a writer uploading objects of random sizes (single and multipart) and
checking each through boto3, straight from the server; a checkpointer saving and loading a state dict. The
path to the server goes through a fault proxy that drops, cuts and fails requests at random, admits a fixed
request rate (503 SlowDown above it) and refuses requests signed with expired keys (ExpiredToken); keys come
from a container credentials endpoint that hands out keys living 8 s. Every path takes its buffers from one
node memory budget (--node-budget-mib, 256 by default). Reported: bytes moved by each path,
every error by type (a typed error is allowed; a wrong byte never), RSS of the process and its workers over
time (rss.png: the soak's own process, which holds the fault proxy's buffers too, and its DataLoader
workers; not the server), in report.json and report.md under --output.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import torch
from torch.utils.data import DataLoader

import torchdata_s3
from tests.credentials_endpoint import container_credentials_endpoint
from tests.fault_proxy import Fault, FaultProxy, any_request
from tests.moto_iam import make_identities, sts_sessions, user_client
from tests.s3_server import MotoServer
from tests.throttle import Throttle
from torchdata_s3 import S3Client, S3Config, S3Error, S3IterableDataset, client

BUCKET = "soak"
OBJECTS = 48
FAULT_RATES = {Fault.SLOW_DOWN: 0.01, Fault.INTERNAL_ERROR: 0.01, Fault.DROP: 0.005, Fault.CUT_BODY: 0.005}
ADMITTED_PER_SECOND = 40
KEY_LIFETIME_S = 8


def object_body(index: int) -> bytes:
    return random.Random(index).randbytes(random.Random(-index).randrange(64 * 1024, 3 * 1024 * 1024))


def key_and_digest(stream) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    return stream.key, hashlib.sha256(stream.read()).hexdigest()


class Tally:
    """What each path moved and met; shared by the threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bytes: Counter[str] = Counter()
        self.done: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.wrong: list[str] = []

    def error(self, path: str, error: BaseException) -> None:
        name = type(error).__name__
        crt = getattr(error, "crt_error", "") or getattr(error, "code", "")
        with self.lock:
            self.errors[f"{path}: {name}{' ' + crt if crt else ''}"] += 1

    def moved(self, path: str, size: int) -> None:
        with self.lock:
            self.bytes[path] += size
            self.done[path] += 1

    def mismatch(self, what: str) -> None:
        with self.lock:
            self.wrong.append(what)


def run_until(deadline: float, tally: Tally, path: str, step: Callable[[], None]) -> None:
    while time.monotonic() < deadline:
        try:
            step()
        except S3Error as error:  # typed: counted, and the path goes on
            tally.error(path, error)
        except Exception as error:
            tally.error(path, error)
            time.sleep(0.5)


def rss_of_tree(root: int, leave_out: int) -> int:
    """Resident bytes of `root` and every process whose parent chain leads to it, but `leave_out`'s."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    tree = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree and pid != leave_out:
                tree.add(pid)
                grew = True
    total = 0
    for pid in tree:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--output", type=Path, default=Path("build/soak"))
    parser.add_argument(
        "--node-budget-mib", type=int, default=256, help="the node memory budget of every path (0: none)"
    )
    args = parser.parse_args()
    args.output.mkdir(parents=True, exist_ok=True)
    budget_file = args.output / "node.budget"
    budget_file.unlink(missing_ok=True)  # a fresh peak

    objects = {f"data/{index:03d}": object_body(index) for index in range(OBJECTS)}
    digests = {key: hashlib.sha256(body).hexdigest() for key, body in objects.items()}
    server = MotoServer(extra_env={"INITIAL_NO_AUTH_ACTION_COUNT": "0"})
    try:
        identities = make_identities(server, {BUCKET: objects})
        direct = user_client(identities, "s3")
        with (
            container_credentials_endpoint(sts_sessions(identities), lifetime_s=KEY_LIFETIME_S) as keys,
            FaultProxy(server.port, seed=25, stall_s=30) as proxy,
        ):
            throttle = Throttle(ADMITTED_PER_SECOND)
            proxy.set_gate(lambda request: keys.refuse_expired(request) or throttle(request))
            proxy.set_rates(FAULT_RATES, eligible=any_request)
            proxy.keep_records = False
            for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
                os.environ.pop(name, None)
            os.environ.update(
                AWS_CONTAINER_CREDENTIALS_FULL_URI=keys.url,
                AWS_ENDPOINT_URL=proxy.endpoint_url,
                AWS_REGION="us-east-1",
                AWS_EC2_METADATA_DISABLED="true",
            )
            if args.node_budget_mib:
                os.environ.update(
                    TORCHDATA_S3_NODE_MEMORY_BUDGET=str(args.node_budget_mib * 2**20),
                    TORCHDATA_S3_NODE_MEMORY_BUDGET_FILE=str(budget_file),
                )
            client._forget_native_clients()
            sizes = {key: len(body) for key, body in objects.items()}
            report = soak(
                args.minutes * 60, server.process.pid, digests, sizes, direct, proxy, throttle, keys
            )
            if args.node_budget_mib:
                budget = S3Client(S3Config.resolve()).node_budget
                assert budget is not None
                report["node budget MiB (limit, peak, held at the end by live and dead processes)"] = [
                    args.node_budget_mib,
                    round(budget.peak / 2**20, 1),
                    round(budget.in_use / 2**20, 1),
                ]
    finally:
        server.stop()
    write_report(args.output, report)


def soak(  # type: ignore[no-untyped-def]
    seconds: float,
    server_pid: int,
    digests: dict,
    sizes: dict,
    direct,
    proxy: FaultProxy,
    throttle: Throttle,
    keys,
) -> dict:
    tally = Tally()
    started = time.monotonic()
    deadline = started + seconds
    config = S3Config.resolve(multipart_threshold_bytes=8 * 1024 * 1024)
    loader = DataLoader(
        # The whole bucket, listed now, when it holds only the data: moto checks the signature of a listing
        # with a prefix holding '/' wrongly (tests/integration/test_credentials.py).
        S3IterableDataset.from_prefix(f"s3://{BUCKET}/", transform=key_and_digest),
        batch_size=None,
        num_workers=2,
        persistent_workers=True,
    )

    def read_epoch() -> None:
        for key, digest in loader:
            if digest != digests[key]:
                tally.mismatch(f"read {key}")
            tally.moved("DataLoader", sizes[key])
        with tally.lock:
            tally.done["DataLoader epochs"] += 1

    writes = random.Random(1)

    def write_one() -> None:
        index = tally.done["writer"]
        body = writes.randbytes(writes.choice([100_000, 3_000_000, 17_000_000]))
        key = f"written/{index:05d}"
        with S3Client(config).open(f"s3://{BUCKET}/{key}", "wb") as writer:
            writer.write(body)
        stored = direct.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        if hashlib.sha256(stored).digest() != hashlib.sha256(body).digest():
            tally.mismatch(f"write {key}")
        tally.moved("writer", len(body))

    def checkpoint() -> None:
        step = tally.done["checkpoint"]
        state = {"weights": torch.randn(512, 512), "step": step}
        url = f"s3://{BUCKET}/checkpoints/step-{step:05d}.pt"
        torchdata_s3.save(state, url, config=config)
        loaded = torchdata_s3.load(url, config=config)
        if not (torch.equal(loaded["weights"], state["weights"]) and loaded["step"] == step):
            tally.mismatch(f"checkpoint {url}")
        buffer = io.BytesIO()
        torch.save(state, buffer)
        tally.moved("checkpoint", 2 * buffer.tell())
        time.sleep(2)

    rss: list[tuple[float, int]] = []

    def sample() -> None:
        while time.monotonic() < deadline:
            rss.append((time.monotonic() - started, rss_of_tree(os.getpid(), leave_out=server_pid)))
            time.sleep(1)

    threads = [
        threading.Thread(target=run_until, args=(deadline, tally, "DataLoader", read_epoch)),
        threading.Thread(target=run_until, args=(deadline, tally, "writer", write_one)),
        threading.Thread(target=run_until, args=(deadline, tally, "checkpoint", checkpoint)),
        threading.Thread(target=sample),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": round(time.monotonic() - started, 1),
        "objects read": tally.done["DataLoader"],
        "epochs": tally.done["DataLoader epochs"],
        "bytes read (DataLoader)": tally.bytes["DataLoader"],
        "objects written": tally.done["writer"],
        "bytes written": tally.bytes["writer"],
        "checkpoints saved and loaded": tally.done["checkpoint"],
        "checkpoint bytes (saved + loaded)": tally.bytes["checkpoint"],
        "errors": dict(tally.errors),
        "wrong objects": tally.wrong,
        "faults injected": {fault.value: count for fault, count in proxy.injected.items()},
        "refused": dict(proxy.refused),
        "requests admitted per second (limit)": ADMITTED_PER_SECOND,
        "keys issued": len(keys.issued),
        "rss": rss,
    }


def write_report(output: Path, report: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rss = report.pop("rss")
    figure, axes = plt.subplots(figsize=(8, 3.5))
    axes.plot([t for t, _ in rss], [b / 2**20 for _, b in rss])
    axes.set_xlabel("seconds")
    axes.set_ylabel("RSS, MiB")
    axes.set_title(f"soak, {report['date']}")
    figure.tight_layout()
    figure.savefig(output / "rss.png", dpi=100)
    report["rss MiB (min, max, last)"] = (
        [
            round(min(b for _, b in rss) / 2**20),
            round(max(b for _, b in rss) / 2**20),
            round(rss[-1][1] / 2**20),
        ]
        if rss
        else []
    )
    (output / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [f"- {name}: {value}" for name, value in report.items()]
    (output / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"soak: report in {output}/report.md, RSS plot in {output}/rss.png")
    if report["wrong objects"]:
        raise SystemExit("soak: objects came back wrong (above)")


if __name__ == "__main__":
    main()
