"""The benchmark harness: ``python -m benchmarks [options]`` (``scripts/bench.sh`` installs what it needs).

Generates the datasets, starts the embedded endpoint for each profile (or uses --endpoint-url), checks that
the profile delivers what it claims, runs every client on every workload in its own process, interleaved
round by round, verifies each client read the right bytes, and writes a table, JSON and PNG plots.

With no options it runs the headline workloads (large and small objects) on both profiles at sizes that
finish within minutes; ``--full`` runs every workload at full size, ``--quick`` is a smoke run.
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from benchmarks import datasets
from benchmarks.clients import (
    CLIENTS,
    OURS,
    SOCKET_FLOOR,
    SOCKET_FLOOR_AHEAD,
    UNSIGNED,
    ensure_paths,
    fsspec_ranges,
    load,
)
from benchmarks.clients.common import Context
from benchmarks.progress import Progress
from benchmarks.report import summarize, table, validate, write_json
from benchmarks.runner import Case, Run, run_interleaved
from benchmarks.workloads import HEADLINE, OPT_IN, WORKLOADS, Workload

REPO = Path(__file__).resolve().parent.parent

# The sizes of each kind of run; an option given on the command line overrides its preset's value.
FULL = {
    "workloads": ",".join(w for w in WORKLOADS if w not in OPT_IN),
    "rounds": 3,
    "scale": 0.1,
    "text_shards": 4,
    "batch_sizes": "32,128,512",
    "num_workers": "0,2",
    "large_count": 8,
    "large_size_mib": 64,
    "small_count": 2000,
    "small_size_kb": 110,
    "list_count": 100_000,
    "stream_size_mib": 1024,
    "image_count": 400,
    "parquet_size_mib": 64,
    "zip_size_mib": 256,
    "content_check": "every",
    "epochs": 2,
    # Issue 12's write workloads: upload-large, upload-small and upload-stream send the large, small and huge
    # datasets above (8 x 64 MiB, 2,000 x 110 kB, 1 GiB); checkpoint and dcp state dicts of these sizes.
    "checkpoint_size_mib": 1024,
    "dcp_size_mib": 512,
}
# The newcomer's first run: the headline workloads, at sizes where the slowest peer on `s3like` (a request
# at a time, 30 ms each) still finishes each run in seconds. Ratios hold at these sizes; the full suite's
# larger datasets only tighten them.
DEFAULT = {
    **FULL,
    "workloads": ",".join(HEADLINE),
    "large_count": 4,
    "large_size_mib": 32,
    "small_count": 150,
    # The untimed content check on the first profile only: the second reads the same data with the same
    # client code, and its rounds still check item counts. It saves a sixth of the run's time.
    "content_check": "first",
}
QUICK = {
    **FULL,
    "rounds": 2,
    "scale": 0.02,
    "text_shards": 2,
    "batch_sizes": "512",
    "large_count": 4,
    "large_size_mib": 32,
    "small_count": 300,
    "list_count": 10_000,
    "stream_size_mib": 256,
    "image_count": 100,
    "parquet_size_mib": 16,
    "zip_size_mib": 64,
    "checkpoint_size_mib": 128,
    "dcp_size_mib": 64,
}


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    preset = p.add_mutually_exclusive_group()
    preset.add_argument(
        "--full", action="store_true", help="every workload at full size (about an hour per profile)"
    )
    preset.add_argument(
        "--quick", action="store_true", help="every workload, small sizes and 2 rounds: a smoke run"
    )
    p.add_argument("--profile", choices=["fast", "s3like", "both"], default="both")
    p.add_argument("--latency-ms", type=float, default=30.0, help="s3like time to first byte [30]")
    p.add_argument("--bandwidth-mbps", type=float, default=90.0, help="s3like MB/s per connection [90]")
    p.add_argument(
        "--workloads",
        help=f"comma list of {', '.join(WORKLOADS)} [default run: {','.join(HEADLINE)}; --full: all]",
    )
    p.add_argument("--clients", default=",".join(CLIENTS), help="comma list of client names")
    p.add_argument("--rounds", type=int, help="timed rounds per client and case [3]")
    p.add_argument("--scale", type=float, help="text lines per shard as a fraction of 100k [0.1]")
    p.add_argument("--text-shards", type=int)
    p.add_argument("--batch-sizes")
    p.add_argument("--num-workers")
    p.add_argument("--large-count", type=int, help="[default run: 4; --full: 8]")
    p.add_argument("--large-size-mib", type=int, help="[default run: 32; --full: 64]")
    p.add_argument("--small-count", type=int, help="[default run: 150; --full: 2000]")
    p.add_argument("--small-size-kb", type=int)
    p.add_argument("--list-count", type=int)
    p.add_argument("--listing-keys", type=int, default=1_000_000, help="listing-scale: keys per shape [10^6]")
    p.add_argument(
        "--listing-shapes", default="tree,flat", help="listing-scale: tree, flat and/or skewed [tree,flat]"
    )
    p.add_argument("--listing-page-ms", type=float, default=100.0, help="listing-scale: page latency [100]")
    p.add_argument(
        "--listing-ten-million",
        action="store_true",
        help="listing-scale: also list 10^7 keys per shape (sequential peers take ~20 min each)",
    )
    p.add_argument("--epochs", type=int, help="epochs of the epochs workload, at least 2 [2]")
    p.add_argument("--stream-size-mib", type=int, help="the stream workload's one object [1024]")
    p.add_argument("--image-count", type=int, help="JPEG objects of the images workload [400]")
    p.add_argument("--parquet-size-mib", type=int, help="the random workload's Parquet file [64]")
    p.add_argument("--zip-size-mib", type=int, help="the random workload's zip archive [256]")
    p.add_argument(
        "--checkpoint-size-mib",
        type=int,
        help="the checkpoint workload's state dict (64 MiB tensors) [1024; --quick: 128]",
    )
    p.add_argument(
        "--dcp-size-mib", type=int, help="the dcp workload's state dict, over 2 ranks [512; --quick: 64]"
    )
    p.add_argument(
        "--content-check",
        choices=["first", "every"],
        help="profiles whose clients first prove, untimed, that they read the dataset's exact content "
        "[default run: first; --full, --quick: every]",
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
    chosen = FULL if args.full else QUICK if args.quick else DEFAULT
    for name, value in chosen.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    unknown = set(args.workloads.split(",")) - set(WORKLOADS)
    if unknown:
        p.error(f"unknown workloads {sorted(unknown)}; choose from {', '.join(WORKLOADS)}")
    if args.epochs < 2:
        p.error(f"--epochs must be at least 2 (the first fills the caches), got {args.epochs}")
    return args


# Clients that cannot be told to trust the run's CA, so --https leaves them out.
NO_PRIVATE_CA = {
    "torchdata-original": "its aws-sdk-cpp (libcurl) reads no CA variable and fails with curlCode 60",
    **{
        floor: "it is plain HTTP on one socket (the floor of a plain-HTTP read)"
        for floor in (SOCKET_FLOOR, SOCKET_FLOOR_AHEAD)
    },
}

IMAGES_NUM_WORKERS = 2
MiB = 1024 * 1024  # the DataLoader with workers, on this 2-core machine


def build_cases(
    args: argparse.Namespace, endpoint_url: str, manifests: dict, workloads: Optional[list[str]] = None
) -> list[Case]:
    """The cases of `workloads` (default: ``args.workloads``) against `endpoint_url`."""
    cases = []
    for name in args.workloads.split(",") if workloads is None else workloads:
        workload = WORKLOADS[name]
        if workload.writes:
            cases.append(write_case(args, endpoint_url, manifests, workload))
            continue
        manifest = manifests[workload.datasets[0]]
        base = {
            "endpoint_url": endpoint_url,
            "bucket": args.bucket,
            "prefix": f"{manifest.spec_name}/",
            "keys": manifest.keys,
            "sizes": manifest.sizes,
        }

        def case(variant: str, context: Context, items: int, digest: int) -> Case:
            return Case(name, variant, context, items, digest, workload.unit)  # noqa: B023

        if name == "text":
            for workers in (int(w) for w in args.num_workers.split(",")):
                for batch in (int(b) for b in args.batch_sizes.split(",")):
                    context = Context(**base, batch_size=batch, num_workers=workers)
                    cases.append(
                        case(f"batch={batch} workers={workers}", context, manifest.lines, manifest.digest)
                    )
        elif name == "images":
            context = Context(**base, num_workers=IMAGES_NUM_WORKERS)
            cases.append(case(f"workers={IMAGES_NUM_WORKERS}", context, len(manifest.keys), manifest.digest))
        elif name == "random":
            for kind, picks in manifest.extra.items():
                selection = {
                    "format": kind,
                    **{k: v for k, v in picks.items() if k in ("columns", "members")},
                }
                context = Context(**{**base, "keys": [picks["key"]]}, selection=selection)
                items = picks["rows"] if kind == "parquet" else len(picks["members"])
                variant = (
                    f"parquet: {len(picks['columns'])} of {manifest.parameters['parquet_columns']} columns"
                    if kind == "parquet"
                    else f"zip: {len(picks['members'])} members"
                )
                cases.append(case(variant, context, items, picks["digest"]))
        elif name == "ranges":
            key, size = manifest.keys[0], manifest.sizes[0]
            ranges = fsspec_ranges.pick(size)
            data = (Path(args.data_dir) / args.bucket / key).read_bytes()
            context = Context(**{**base, "keys": [key], "sizes": [size]}, selection={"ranges": ranges})
            variant = f"{len(ranges):,} x {fsspec_ranges.RANGE_BYTES // 1024} KiB of {size // MiB} MiB"
            cases.append(case(variant, context, len(ranges), fsspec_ranges.digest(data, ranges)))
        elif name == "get-file":
            context = Context(**base, local_dir=str(Path(args.data_dir).resolve()))
            cases.append(case(f"1 x {manifest.sizes[0] // MiB:,} MiB", context, 1, manifest.digest))
        elif name == "epochs":
            for dataset in workload.datasets:
                manifest = manifests[dataset]
                context = Context(
                    endpoint_url=endpoint_url,
                    bucket=args.bucket,
                    prefix=f"{manifest.spec_name}/",
                    keys=manifest.keys,
                    sizes=manifest.sizes,
                    epochs=args.epochs,
                    local_dir=str(Path(args.data_dir).resolve()),
                )
                size = manifest.sizes[0]
                shown = f"{size // MiB} MiB" if size >= MiB else f"{size // 1000} kB"
                variant = f"{dataset} objects ({len(manifest.keys)} x {shown}), {args.epochs} epochs"
                cases.append(case(variant, context, len(manifest.keys), manifest.digest))
        else:
            # The data directory too: the references that read the served files themselves (lines-floor).
            context = Context(**base, local_dir=str(Path(args.data_dir).resolve()))
            cases.append(case("", context, len(manifest.keys), manifest.digest))
    return cases


def write_case(args: argparse.Namespace, endpoint_url: str, manifests: dict, workload: Workload) -> Case:
    """A write workload's case: the dataset objects it uploads, or the state dict it saves and loads. Where
    the endpoint is the embedded one, what is written is read back from its data directory."""
    from benchmarks import state_dicts
    from benchmarks.clients.dcp_ranks import RANKS

    served_dir = "" if getattr(args, "endpoint_url", None) else str(Path(args.data_dir).resolve())
    common = {
        "endpoint_url": endpoint_url,
        "bucket": args.bucket,
        "prefix": "",  # each measurement's own, set by benchmarks.measure
        "served_dir": served_dir,
        "local_dir": str(Path(args.data_dir).resolve()),
    }
    if workload.datasets:
        manifest = manifests[workload.datasets[0]]
        context = Context(**common, keys=manifest.keys, sizes=manifest.sizes)
        size = manifest.sizes[0]
        shown = f"{size / MiB:.4g} MiB" if size >= MiB else f"{size / 1000:.4g} kB"
        variant = f"{len(manifest.keys):,} x {shown}"
        return Case(workload.name, variant, context, len(manifest.keys), manifest.digest, workload.unit)
    size_mib = args.dcp_size_mib if workload.name == "dcp" else args.checkpoint_size_mib
    ranks = RANKS if workload.name == "dcp" else 1
    names, sizes = state_dicts.layout(size_mib * MiB)
    context = Context(**common, keys=names, sizes=sizes)
    variant = f"{sum(sizes) / MiB:.4g} MiB in {len(names)} tensors"
    variant += f", {ranks} ranks" if ranks > 1 else ""
    digest = state_dicts.expected_digest(size_mib * MiB, ranks)
    return Case(workload.name, variant, context, len(names), digest, workload.unit)


def clients_for(requested: list[str]):  # type: ignore[no-untyped-def]
    def choose(case: Case) -> list[str]:
        chosen = []
        for name in requested:
            try:
                module = load(name)
            except ImportError as error:
                print(f"  skipping {name}: not installed ({error})", file=sys.stderr)
                continue
            if hasattr(module, WORKLOADS[case.workload].function):
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
        "images": datasets.images_spec(args.image_count),
        "random": datasets.random_spec(args.parquet_size_mib, args.zip_size_mib),
    }
    needed = {dataset for w in args.workloads.split(",") for dataset in WORKLOADS[w].datasets}
    args.data_dir.mkdir(parents=True, exist_ok=True)
    return {
        name: datasets.ensure_dataset(args.data_dir, spec) for name, spec in specs.items() if name in needed
    }


def run_profile(
    args: argparse.Namespace, profile: str, manifests: dict, progress: Progress, check_content: bool
) -> dict:
    """Every requested case on `profile`: the read workloads on the endpoint as it always was (it accepts
    no writes), then the write workloads on one started to accept writes, so neither changes the other's."""
    requested = requested_clients(args)
    environment: dict[str, str] = {}
    tls_directory = None
    cases: list[Case] = []
    runs: list[Run] = []
    profile_checks = {}
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
                if client in args.clients.split(","):
                    progress.note(f"--https: leaving out {client}: {why}")
        names = args.workloads.split(",")
        for writes in (False, True):
            group = [name for name in names if WORKLOADS[name].writes == writes]
            if not group:
                continue
            group_cases, group_runs, profile_checks[writes] = _run_group(
                args, profile, manifests, progress, check_content, group, writes, tls, environment, requested
            )
            cases += group_cases
            runs += group_runs
    finally:
        if tls_directory is not None:
            tls_directory.cleanup()
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "profile": profile,
        "https": bool(args.https and not args.endpoint_url),
        "latency_ms": args.latency_ms if profile == "s3like" else 0,
        "bandwidth_mbps": args.bandwidth_mbps if profile == "s3like" else None,
        # The read workloads' endpoint's check (or the writes' one, in a run of write workloads only).
        "profile_check": profile_checks.get(False, profile_checks.get(True)),
        "rounds": args.rounds,
        "content_checked": check_content,
        "datasets": {
            name: {"parameters": m.parameters, "bytes": m.total_bytes} for name, m in manifests.items()
        },
        "client_configurations": {name: getattr(load(name), "CONFIGURATION", "") for name in CLIENTS},
    }
    if False in profile_checks and True in profile_checks:
        meta["profile_check_writes"] = profile_checks[True]
    return summarize(cases, runs, meta)


def _run_group(
    args: argparse.Namespace,
    profile: str,
    manifests: dict,
    progress: Progress,
    check_content: bool,
    workloads: list[str],
    writes: bool,
    tls: Optional[tuple[Path, Path]],
    environment: dict[str, str],
    requested: list[str],
) -> tuple[list[Case], list[Run], dict]:
    """`workloads` (all reading or all writing) on an endpoint of their own: ``(cases, runs, its check)``."""
    from benchmarks.endpoint.access_log import AccessLog
    from benchmarks.endpoint.nginx import LocalEndpoint
    from benchmarks.writes import WRITES_ROOT

    endpoint = None
    access_log = None
    try:
        if args.endpoint_url:
            endpoint_url = args.endpoint_url
            profile_check = {"note": "external endpoint: not shaped or checked by the harness"}
        else:
            kind = "writable " if writes else ""
            progress.note(f"profile {profile}: starting the {kind}endpoint and checking its shaping")
            if writes:  # what an interrupted earlier run left
                shutil.rmtree(Path(args.data_dir) / args.bucket / WRITES_ROOT, ignore_errors=True)
            endpoint = LocalEndpoint(
                args.data_dir,
                profile,
                args.latency_ms,
                args.bandwidth_mbps,
                tls=tls,
                **({"writes": True} if writes else {}),
            ).start()
            endpoint_url = endpoint.endpoint_url
            access_log = AccessLog(endpoint.access_log)
            key = datasets.ensure_probe(args.data_dir)
            profile_check = checked_profile(
                args, endpoint_url, key, profile, progress, ca_file=environment.get("AWS_CA_BUNDLE")
            )
        cases = build_cases(args, endpoint_url, manifests, workloads)
        units = {case.workload: case.unit for case in cases}

        def on_run(label: str, run: Optional[Run]) -> None:
            if run is not None and label.endswith("(content check)"):
                progress.total -= args.rounds  # failed its check: left out of the rounds
            progress.measured(profile, label, run, units[label.split()[0]])

        runs = run_interleaved(
            cases,
            clients_for(requested),
            args.rounds,
            environment,
            args.timeout_s,
            on_run,
            access_log,
            check_content,
            endpoint.process_ids() if endpoint is not None else (),
        )
    finally:
        if endpoint is not None:
            endpoint.stop()
    return cases, runs, profile_check


PROFILE_CHECK_ATTEMPTS = 3
PROFILE_CHECK_PAUSE_S = 5.0


def checked_profile(
    args: argparse.Namespace,
    endpoint_url: str,
    key: str,
    profile: str,
    progress: Progress,
    ca_file: Optional[str] = None,
) -> dict:
    """The endpoint's profile check, tried up to PROFILE_CHECK_ATTEMPTS times: on a shared machine a burst
    of other work can starve one probe connection for a moment (seen: 15 MB/s on `s3like`), while a profile
    that is really not in effect fails every attempt."""
    from benchmarks.endpoint.verify import check_profile

    for attempt in range(1, PROFILE_CHECK_ATTEMPTS + 1):
        try:
            return check_profile(
                endpoint_url, args.bucket, key, profile, args.latency_ms, args.bandwidth_mbps, ca_file=ca_file
            )
        except RuntimeError as failure:
            if attempt == PROFILE_CHECK_ATTEMPTS:
                raise
            progress.note(f"profile {profile}: check attempt {attempt} failed ({failure}); trying again")
            time.sleep(PROFILE_CHECK_PAUSE_S)
    raise AssertionError("unreachable")


# What clients_for() chooses from for listing-scale: the clients that implement it.
_LISTING_SCALE_PROBE = Case("listing-scale", "", Context("", "", "", []), 0, None, "keys/s")


def requested_clients(args: argparse.Namespace) -> list[str]:
    requested = args.clients.split(",")
    if args.endpoint_url:
        requested = [c for c in requested if c not in UNSIGNED]  # unsigned requests: embedded only
    elif args.https:
        requested = [c for c in requested if c not in NO_PRIVATE_CA]
    return requested


def measurements_per_profile(args: argparse.Namespace, manifests: dict, check_content: bool) -> int:
    """How many processes one profile runs: per case and client, the rounds and maybe a content check."""
    choose = clients_for(requested_clients(args))
    cases = build_cases(args, "http://127.0.0.1:0", manifests)
    return sum(len(choose(case)) * (args.rounds + int(check_content)) for case in cases)


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(sys.argv[1:] if argv is None else argv)
    names = args.workloads.split(",")
    if "listing-scale" in names:
        # Its own endpoint (generated keys; --endpoint-url and --profile do not apply), once rather than per
        # profile; then whatever else was asked.
        from benchmarks import listing_scale

        started = time.monotonic()
        scale_clients = clients_for(args.clients.split(","))(_LISTING_SCALE_PROBE)
        progress = Progress(listing_scale.measurements(args, scale_clients))
        listing_scale.run_and_report(args, scale_clients, progress)
        rest = [name for name in names if name != "listing-scale"]
        minutes, seconds = divmod(int(time.monotonic() - started), 60)
        print(f"listing-scale finished in {minutes}:{seconds:02d}")
        if not rest:
            return 0
        args.workloads = ",".join(rest)
    if args.endpoint_url and args.profile == "both":
        args.profile = "fast"  # an external endpoint is what it is: one pass
    started = time.monotonic()
    if not args.endpoint_url:
        from benchmarks.endpoint.nginx import ensure_nginx_installed

        ensure_nginx_installed()
    ensure_paths(requested_clients(args), REPO)  # torchdata 0.11 for torchdata_s3-nodes, if requested
    manifests = ensure_datasets(args)
    if args.endpoint_url and args.upload:
        from benchmarks.upload import upload_missing

        upload_missing(args.endpoint_url, args.bucket, args.data_dir, manifests)
    args.output.mkdir(parents=True, exist_ok=True)
    from benchmarks.plots import plot

    profiles = ["fast", "s3like"] if args.profile == "both" else [args.profile]
    checked = {p: args.content_check == "every" or i == 0 for i, p in enumerate(profiles)}
    progress = Progress(sum(measurements_per_profile(args, manifests, checked[p]) for p in profiles))
    progress.note(
        f"{progress.total} measurements: workloads {args.workloads} on {', '.join(profiles)}, "
        f"{args.rounds} rounds (each a fresh process)"
    )
    written = []
    for profile in profiles:
        document = run_profile(args, profile, manifests, progress, checked[profile])
        validate(document)
        stamp = document["meta"]["date"][:19].replace(":", "")
        path = args.output / f"results-{profile}{'-https' if args.https else ''}-{stamp}.json"
        write_json(document, path)  # at once: a later profile's failure keeps this one's results
        written.append((document, path))
    for document, path in written:
        print(table(document))
        images = plot(document, args.output)
        print(f"\nwrote {path} and {', '.join(str(i) for i in images)}")
    minutes, seconds = divmod(int(time.monotonic() - started), 60)
    print(f"\nfinished in {minutes}:{seconds:02d}" + ("" if args.full else "; the whole suite: --full"))
    return 0
