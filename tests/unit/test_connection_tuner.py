"""The connection tuner's rules (csrc/connection_tuner.h), on a simulated clock.

Each simulated endpoint is a rate for each number of connections: the tuner's limit decides how fast the next
part (8 MiB) comes, as a real client's would. The tuner here has no client; it decides only. That the limit
reaches a real client, and that GETs and uploads feed it, is tests/integration/test_connection_tuner.py.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import pytest

from torchdata_s3 import _core

PART = 8 * 1024 * 1024
CONFIGURED = 125  # the CRT's number for the default throughput target (50 Gbps)
GB_PER_S = 1.0  # bytes per ns
PER_CONNECTION = 0.09 * GB_PER_S  # about what S3 gives one connection


class Endpoint(NamedTuple):
    """What a client gets from an endpoint with `limit` connections allowed: the rate (bytes per ns) and how
    many of them its requests use (`busy`: what the reader keeps going, as its read windows allow)."""

    rate_of: Callable[[int], float]
    busy: int = CONFIGURED

    def in_use(self, limit: int) -> int:
        return min(limit, self.busy)


def run(
    tuner: _core.ConnectionTuner,
    endpoint: Endpoint,
    parts: int,
    start_ns: int = 1,
    pause_every: int = 0,
    pause_ns: int = 0,
    limits: Optional[list[int]] = None,
) -> int:
    """Delivers `parts` parts from `endpoint` at the tuner's limit, with a pause of `pause_ns` every
    `pause_every` parts (a reader that stopped), adding the limit after each to `limits`. Returns the clock at
    the end."""
    now = start_ns
    for index in range(parts):
        now += int(PART / endpoint.rate_of(tuner.limit))
        if pause_every and index % pause_every == pause_every - 1:
            now += pause_ns
        tuner.on_delivered_at(PART, now, endpoint.in_use(tuner.limit))
        if limits is not None:
            limits.append(tuner.limit)
    return now


# An endpoint (or a CPU) that gives the same rate through any number of connections; the reader keeps 16 busy.
FLAT = Endpoint(lambda limit: 2.5 * GB_PER_S, busy=16)
# An endpoint that limits each connection: more connections, more rate, and the reader keeps them all busy.
PER_CONNECTION_LIMITED = Endpoint(lambda limit: limit * PER_CONNECTION)


def demand_of(connections: int) -> Endpoint:
    """Each connection limited, and only `connections` of them with anything to do."""
    return Endpoint(lambda limit: min(limit, connections) * PER_CONNECTION, busy=connections)


def test_a_rate_that_more_connections_do_not_raise_brings_the_limit_down_to_two() -> None:
    tuner = _core.ConnectionTuner(CONFIGURED)
    assert tuner.limit == CONFIGURED  # the CRT's number until the first probe
    run(tuner, FLAT, 2000)
    assert tuner.limit == 2  # never one: a stalled connection would stop every request
    # 125 -> 16 (what the reader kept busy, in one probe) -> 8 -> 4 -> 2
    assert tuner.probes_kept == 4


def test_an_endpoint_that_limits_each_connection_keeps_every_connection() -> None:
    tuner = _core.ConnectionTuner(CONFIGURED)
    limits: list[int] = []
    run(tuner, PER_CONNECTION_LIMITED, 5000, limits=limits)
    assert tuner.limit == CONFIGURED
    assert min(limits) == CONFIGURED // 2  # probed, and undone
    assert tuner.windows >= 20 and tuner.probes_kept == 0


def test_a_probe_with_fewer_connections_that_halves_the_rate_ends_early() -> None:
    tuner = _core.ConnectionTuner(CONFIGURED)
    limits: list[int] = []
    run(tuner, PER_CONNECTION_LIMITED, 5000, limits=limits)
    probes = sum(1 for before, after in zip(limits, limits[1:]) if before > after)
    assert probes >= 2
    # Each probe: the deliveries still owed to the old limit (16), then a quarter of a window (8-9 of the
    # 32-34 a full window of at least 50 ms takes here): about 25 deliveries, where a whole one would take 51.
    assert limits.count(CONFIGURED // 2) <= probes * 30


def test_the_limit_stays_at_or_above_what_the_reader_keeps_busy() -> None:
    tuner = _core.ConnectionTuner(CONFIGURED)
    run(tuner, demand_of(16), 3000)
    # Halving below 16 connections costs rate: the surplus goes, what moves the bytes stays.
    assert 16 <= tuner.limit < CONFIGURED


def test_the_limit_grows_again_when_more_connections_start_to_pay() -> None:
    tuner = _core.ConnectionTuner(CONFIGURED)
    now = run(tuner, FLAT, 2000)
    assert tuner.limit == 2
    run(tuner, PER_CONNECTION_LIMITED, 6000, start_ns=now)
    assert tuner.limit >= 64  # doubled back while each doubling paid


def test_a_reader_that_pauses_does_not_make_fewer_connections_look_as_fast() -> None:
    # A pause inside a window measured at the current limit would make that window's rate low, and a probe
    # with fewer connections after it look no slower: windows holding an idle second are not measured.
    tuner = _core.ConnectionTuner(CONFIGURED)
    run(tuner, PER_CONNECTION_LIMITED, 6000, pause_every=300, pause_ns=2_000_000_000)
    assert tuner.probes_kept == 0 and tuner.limit == CONFIGURED
    assert tuner.windows >= 10


def test_a_configured_number_below_the_floor_is_left_alone() -> None:
    tuner = _core.ConnectionTuner(2)
    run(tuner, FLAT, 500)
    assert tuner.limit == 2


@pytest.mark.parametrize("configured", [0, 1])
def test_a_configured_number_of_one_or_none_means_one(configured: int) -> None:
    tuner = _core.ConnectionTuner(configured)
    run(tuner, FLAT, 200)
    assert tuner.limit == 1
