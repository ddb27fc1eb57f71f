"""tests/suite_budget.py, the costly twins moved to ``slow``: every case exists and is slow, and
every guard it names exists and runs in the default run (is not ``slow`` itself), so that no
property leaves the default run without a named check of it there. Read from this session's
collection (``suite_budget.COLLECTED``): a case or guard in a file this session did not collect
is not checked (the whole suite collects every file)."""
from suite_budget import COLLECTED, SLOW_CASES


def test_every_slow_case_and_guard_exists_and_the_guards_run_by_default():
    files = {nodeid.split("::")[0] for nodeid in COLLECTED}
    assert files, "the collection hook recorded nothing"
    checked = 0
    for case, (guards, why) in SLOW_CASES.items():
        assert guards and why, case
        if case.split("::")[0] in files:
            assert COLLECTED.get(case) is True, f"{case}: not collected, or not slow"
            checked += 1
        for guard in guards:
            assert guard not in SLOW_CASES, guard
            if guard.split("::")[0] in files:
                assert COLLECTED.get(guard) is False, f"{case}: its guard {guard} is missing or slow"
    assert checked or not any(c.split("::")[0] in files for c in SLOW_CASES)
