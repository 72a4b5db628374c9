# Sourced by scripts/test.sh and scripts/sanitize.sh: how their test runs spread over processes.
# TEST_PROCESSES pytest-xdist workers [3] (each starts its own test servers; 0: in this process), each given
# whole files, so that module-scoped servers start once per file. Most tests wait on servers and
# subprocesses, so more processes than the 2 cores keep both busy: one process left a core idle most of the
# time, and on the 2-core AMD VM (2026-11-28) every test took 805 s with two and 702 s with three (1.74 cores
# busy). pytest-benchmark is not used by tests/ and would refuse xdist with a warning, which the warning
# filter makes an error. A worker that crashes is not replaced: the run fails with that test named.
# (Replaced, the new worker and the controller once waited on each other for good under --dist loadfile,
# which CI would have seen as a hang.)
# shellcheck disable=SC2034  # used by the sourcing script
pytest_process_args=(-p no:benchmark -n "${TEST_PROCESSES:-3}" --dist loadfile --max-worker-restart=0)
