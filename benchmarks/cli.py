"""The benchmark harness: ``python -m benchmarks [options]`` (``scripts/bench.sh`` installs what it needs).

Generates the datasets, starts the embedded endpoint for each profile (or uses --endpoint-url), checks that
the profile delivers what it claims, runs every client on every workload in its own process, interleaved
round by round, verifies each client read the right bytes, and writes a table, JSON and PNG plots.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
from pathlib import Path

from tqdm import tqdm

from benchmarks import datasets
from benchmarks.clients import CEILING, CLIENTS, OURS, WORKLOADS, load
from benchmarks.clients.common import Context
from benchmarks.report import summarize, table, validate, write_json
from benchmarks.runner import Case, Run, run_interleaved

REPO = Path(__file__).resolve().parent.parent
UNITS = {
    "text": "samples/s",
    "large": "MB/s",
    "small": "objects/s",
    "listing": "keys/s",
    "stream": "MB/s",
    "gil": "pace %",
}
DATASET_OF = {
    "text": "text",
    "large": "large",
    "small": "small",
    "listing": "list",
    "stream": "huge",
    "gil": "large",
}


# Clients that cannot be told to trust the run's CA, so --https leaves them out.
NO_PRIVATE_CA = {
    "torchdata-original": "its aws-sdk-cpp (libcurl) reads no CA variable and fails with curlCode 60",
}


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    p.add_argument("--profile", choices=["fast", "s3like", "both"], default="both")
    p.add_argument("--latency-ms", type=float, default=30.0, help="s3like time to first byte [30]")
    p.add_argument("--bandwidth-mbps", type=float, default=90.0, help="s3like MB/s per connection [90]")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma list of {', '.join(WORKLOADS)}")
    p.add_argument("--clients", default=",".join(CLIENTS), help="comma list of client names")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per client and case [3]")
    p.add_argument(
        "--scale", type=float, default=0.1, help="text lines per shard as a fraction of 100k [0.1]"
    )
    p.add_argument("--text-shards", type=int, default=4)
    p.add_argument("--batch-sizes", default="32,128,512")
    p.add_argument("--num-workers", default="0,2")
    p.add_argument("--large-count", type=int, default=8)
    p.add_argument("--large-size-mib", type=int, default=64)
    p.add_argument("--small-count", type=int, default=2000)
    p.add_argument("--small-size-kb", type=int, default=110)
    p.add_argument("--list-count", type=int, default=100_000)
    p.add_argument("--stream-size-mib", type=int, default=1024, help="the stream workload's one object")
    p.add_argument(
        "--quick", action="store_true", help="small sizes and 2 rounds: a few minutes, for a smoke run"
    )
    p.add_argument("--data-dir", type=Path, default=REPO / "build" / "bench-data")
    p.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results")
    p.add_argument(
        "--endpoint-url", help="use this endpoint instead of the embedded one (data must be uploaded)"
    )
    p.add_argument("--bucket", default=datasets.BUCKET)
    p.add_argument(
        "--upload", action="store_true", help="with --endpoint-url: upload missing dataset objects"
    )
    p.add_argument(
        "--https",
        action="store_true",
        help="serve the embedded endpoint over TLS, with a CA made for the run that every client is told to "
        "trust (AWS_CA_BUNDLE, CURL_CA_BUNDLE, SSL_CERT_FILE)",
    )
    p.add_argument("--timeout-s", type=float, default=900)
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.scale, args.text_shards = 2, 0.02, 2
        args.large_count, args.large_size_mib, args.small_count, args.list_count = 4, 32, 300, 10_000
        args.stream_size_mib = 256
        args.batch_sizes = "512"
    return args


def build_cases(args: argparse.Namespace, endpoint_url: str, manifests: dict) -> list[Case]:
    cases = []
    for workload in args.workloads.split(","):
        manifest = manifests[DATASET_OF[workload]]
        base = {
            "endpoint_url": endpoint_url,
            "bucket": args.bucket,
            "prefix": f"{manifest.spec_name}/",
            "keys": manifest.keys,
            "sizes": manifest.sizes,
        }
        expected_items = manifest.lines if workload == "text" else len(manifest.keys)
        if workload == "text":
            for workers in (int(w) for w in args.num_workers.split(",")):
                for batch in (int(b) for b in args.batch_sizes.split(",")):
                    context = Context(**base, batch_size=batch, num_workers=workers)
                    variant = f"batch={batch} workers={workers}"
                    cases.append(
                        Case(workload, variant, context, expected_items, manifest.digest, UNITS[workload])
                    )
        else:
            cases.append(
                Case(workload, "", Context(**base), expected_items, manifest.digest, UNITS[workload])
            )
    return cases


def clients_for(requested: list[str]):  # type: ignore[no-untyped-def]
    def choose(case: Case) -> list[str]:
        chosen = []
        for name in requested:
            try:
                module = load(name)
            except ImportError as error:
                print(f"  skipping {name}: not installed ({error})", file=sys.stderr)
                continue
            if hasattr(module, case.workload):
                chosen.append(name)
        if OURS not in chosen:
            raise SystemExit(f"{OURS} must be among the clients")
        return chosen

    return choose


def ensure_datasets(args: argparse.Namespace) -> dict:
    specs = {
        "text": datasets.text_spec(args.text_shards, args.scale),
        "large": datasets.large_spec(args.large_count, args.large_size_mib),
        "small": datasets.small_spec(args.small_count, args.small_size_kb),
        "list": datasets.listing_spec(args.list_count),
        "huge": datasets.huge_spec(args.stream_size_mib),
    }
    needed = {DATASET_OF[w] for w in args.workloads.split(",")}
    args.data_dir.mkdir(parents=True, exist_ok=True)
    return {
        name: datasets.ensure_dataset(args.data_dir, spec) for name, spec in specs.items() if name in needed
    }


def run_profile(args: argparse.Namespace, profile: str, manifests: dict) -> dict:
    from benchmarks.endpoint.nginx import LocalEndpoint
    from benchmarks.endpoint.verify import check_profile

    endpoint = None
    requested = args.clients.split(",")
    environment: dict[str, str] = {}
    tls_directory = None
    try:
        tls = None
        if args.https and not args.endpoint_url:
            from benchmarks.endpoint.certificates import make_session_certificates

            tls_directory = tempfile.TemporaryDirectory(prefix="bench-tls-")
            certificates = make_session_certificates(Path(tls_directory.name))
            tls = certificates.valid.nginx_files
            ca_file = str(certificates.ca_file)
            # Each client's own way of being told which CAs to trust.
            environment = {"AWS_CA_BUNDLE": ca_file, "CURL_CA_BUNDLE": ca_file, "SSL_CERT_FILE": ca_file}
            for client, why in NO_PRIVATE_CA.items():
                if client in requested:
                    print(f"--https: leaving out {client}: {why}", file=sys.stderr)
            requested = [client for client in requested if client not in NO_PRIVATE_CA]
        if args.endpoint_url:
            endpoint_url = args.endpoint_url
            profile_check = {"note": "external endpoint: not shaped or checked by the harness"}
            requested = [c for c in requested if c != CEILING]  # unsigned curl requests: embedded only
        else:
            endpoint = LocalEndpoint(
                args.data_dir, profile, args.latency_ms, args.bandwidth_mbps, tls=tls
            ).start()
            endpoint_url = endpoint.endpoint_url
            key = datasets.ensure_probe(args.data_dir)
            profile_check = check_profile(
                endpoint_url,
                args.bucket,
                key,
                profile,
                args.latency_ms,
                args.bandwidth_mbps,
                ca_file=environment.get("AWS_CA_BUNDLE"),
            )
        cases = build_cases(args, endpoint_url, manifests)
        choose = clients_for(requested)
        total = sum(len(choose(c)) * (args.rounds + 1) for c in cases)
        bar = tqdm(total=total, desc=f"profile {profile}", unit="run")

        def on_run(run: Run) -> None:
            bar.update(1 if run.round else 2)  # the first round also stands for its verification run
            bar.set_postfix_str(f"{run.workload} {run.variant} {run.client}: {run.throughput:,.0f}")

        runs = run_interleaved(cases, choose, args.rounds, environment, args.timeout_s, on_run)
        bar.close()
    finally:
        if endpoint is not None:
            endpoint.stop()
        if tls_directory is not None:
            tls_directory.cleanup()
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "profile": profile,
        "https": bool(args.https and not args.endpoint_url),
        "latency_ms": args.latency_ms if profile == "s3like" else 0,
        "bandwidth_mbps": args.bandwidth_mbps if profile == "s3like" else None,
        "profile_check": profile_check,
        "rounds": args.rounds,
        "datasets": {
            name: {"parameters": m.parameters, "bytes": m.total_bytes} for name, m in manifests.items()
        },
        "client_configurations": {name: getattr(load(name), "CONFIGURATION", "") for name in CLIENTS},
    }
    return summarize(cases, runs, meta)


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(sys.argv[1:] if argv is None else argv)
    if args.endpoint_url and args.profile == "both":
        args.profile = "fast"  # an external endpoint is what it is: one pass
    if not args.endpoint_url:
        from benchmarks.endpoint.nginx import ensure_nginx_installed

        ensure_nginx_installed()
    manifests = ensure_datasets(args)
    if args.endpoint_url and args.upload:
        from benchmarks.upload import upload_missing

        upload_missing(args.endpoint_url, args.bucket, args.data_dir, manifests)
    args.output.mkdir(parents=True, exist_ok=True)
    from benchmarks.plots import plot

    profiles = ["fast", "s3like"] if args.profile == "both" else [args.profile]
    for profile in profiles:
        document = run_profile(args, profile, manifests)
        validate(document)
        stamp = document["meta"]["date"][:19].replace(":", "")
        path = args.output / f"results-{profile}{'-https' if args.https else ''}-{stamp}.json"
        write_json(document, path)
        print(table(document))
        images = plot(document, args.output)
        print(f"\nwrote {path} and {', '.join(str(i) for i in images)}")
    return 0
