# Put this folder first on PYTHONPATH to run as if torchdata were not installed (scripts/test.sh's "torch
# alone" run): every process, spawned DataLoader workers included, then fails to import it, as without it.
raise ModuleNotFoundError("No module named 'torchdata' (hidden by tests/without_torchdata)", name="torchdata")
