"""Runs one fuzz target under atheris (libFuzzer) for a bounded time, or replays inputs through it.

Usage:
    python -m tests.fuzz.run TARGET --seconds N [--work-dir DIR]   fuzz for N seconds
    python -m tests.fuzz.run TARGET --replay PATH...                run each input file (or folder) once

Fuzzing starts from the committed corpus (tests/fuzz/corpus/TARGET), which it never writes to: new inputs
go to DIR/TARGET/corpus, a failing input to DIR/TARGET/crash-*. Exit status 0 means no property failed.

Feedback: atheris instruments the Python bytecode of the targets and of torchdata_s3 and records the
operands of comparisons, which is what leads it to, e.g., bytes that are not UTF-8. The native code is built
by GCC, which cannot emit libFuzzer's coverage hooks, so the native parser gets no coverage feedback of its
own. Under the sanitizer build (scripts/sanitize.sh) GCC's ASan runtime takes over the coverage hooks and
atheris fuzzes blindly around the seeds (-keep_seed); that run is for memory errors, and it replays what
the coverage-guided run found.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

CORPUS_ROOT = pathlib.Path(__file__).resolve().parent / "corpus"


def replay(target_name: str, paths: list[pathlib.Path]) -> int:
    from tests.fuzz.targets import TARGETS

    target = TARGETS[target_name]
    files = sorted(f for p in paths for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file())
    for path in files:
        try:
            target(path.read_bytes())
        except BaseException:
            print(f"{target_name}: {path} fails", file=sys.stderr, flush=True)
            raise
    print(f"{target_name}: replayed {len(files)} inputs, all keep the properties")
    return len(files)


def fuzz(target_name: str, seconds: int, work_dir: pathlib.Path, max_len: int) -> None:
    import atheris
    import torch  # noqa: F401  (imported first so that only our own modules get instrumented)

    # The editable install's finder imports torchdata_s3 with its own loader; atheris then needs to
    # instrument without overriding loaders.
    with atheris.instrument_imports(include=["torchdata_s3", "tests.fuzz"], enable_loader_override=False):
        from tests.fuzz.targets import TARGETS

    work = work_dir.resolve() / target_name
    found = work / "corpus"
    found.mkdir(parents=True, exist_ok=True)
    libfuzzer_args = [
        sys.argv[0],
        str(found),  # libFuzzer writes new inputs into the first folder only
        str(CORPUS_ROOT / target_name),
        f"-max_total_time={seconds}",
        f"-max_len={max_len}",
        "-timeout=10",  # one input taking longer is a hang, reported as a failure
        "-rss_limit_mb=4096",
        f"-artifact_prefix={work}/",
        # Mutate around the seeds even when they add no coverage (all of them, under the sanitizer build).
        "-keep_seed=1",
        "-print_final_stats=1",
    ]
    atheris.Setup(libfuzzer_args, TARGETS[target_name])
    atheris.Fuzz()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("target", choices=sorted(p.name for p in CORPUS_ROOT.iterdir() if p.is_dir()))
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--seconds", type=int, help="fuzz for this long")
    mode.add_argument("--replay", type=pathlib.Path, nargs="+", help="run these inputs once")
    parser.add_argument("--work-dir", type=pathlib.Path, default=pathlib.Path("build/fuzz"))
    parser.add_argument("--max-len", type=int, default=8192)
    options = parser.parse_args()
    if options.replay:
        replay(options.target, options.replay)
    else:
        fuzz(options.target, options.seconds, options.work_dir, options.max_len)


if __name__ == "__main__":
    main()
