"""Order of the test files for the parallel run (scripts/dev.sh test: pytest-xdist, --dist loadfile
--no-loadscope-reorder): the longest files start first, so that no worker is left alone with one of them at the
end. (xdist's own reorder, by number of tests, ran the closed loop's file, 3 tests of about 4 minutes, last.)"""

# the longest files of a fresh-clone run (--durations), longest first; the others follow in pytest's order
LONGEST = ["test_evals_e2e.py", "test_patch_runs_value_flow.py", "test_hang_live.py", "test_torch_messages.py",
           "test_evals_cases.py", "test_evals_agentic.py", "test_patch_runs_backend.py", "test_diagnose_cli.py",
           "test_patch_runs_sdpa.py", "test_patch_runs_device.py", "test_diagnose_units.py", "test_netns.py"]


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST)))  # stable: a file's tests keep their order
