"""Every held reference value of ../shared/reference/accounting.json, within its tolerance."""
import json
import os

import pytest

import dpmcmc.accounting as acc

_PATH = os.path.join(os.path.dirname(__file__), "data", "accounting_reference.json")
with open(_PATH) as _f:
    _LOCAL = json.load(_f)

_SHORT = {"algorithm": "", "accountant": "acc=", "relation": None, "chains": "chains=", "delta": "d=",
          "epsilon": "e=", "iterations": "k=", "noise_multiplier": "nm=", "batch_size": "b=", "leapfrog_steps": "L="}


def _entry_id(entry):
    parts = []
    for key, value in entry["args"].items():
        label = _SHORT.get(key, f"{key}=")
        if label is None:
            continue
        parts.append(f"{label}{value:.6g}" if isinstance(value, float) else f"{label}{value}")
    return f"{entry['call']}[{','.join(parts)}]"


def _evaluate(call, args):
    args = dict(args)
    if call == "spent.epsilon":
        return acc.spent(args.pop("algorithm"), args.pop("iterations"), args.pop("delta"), args.pop("n"), **args).epsilon
    if call == "max_iterations":
        return acc.max_iterations(args.pop("algorithm"), args.pop("epsilon"), args.pop("delta"), args.pop("n"), **args)
    return getattr(acc, call)(**args)


def _within(value, ref, tol):
    if "abs" in tol:
        return abs(value - ref) <= tol["abs"]
    if "rel_low" in tol:
        return ref * (1 - tol["rel_low"]) <= value <= ref * (1 + tol["rel_high"])
    return abs(value - ref) <= tol.get("atol", 0.0) + tol["rtol"] * abs(ref)


def test_every_call_type_is_covered(reference_entries):
    calls = {e["call"] for e in reference_entries}
    assert calls == {"gaussian_delta", "gaussian_epsilon", "zcdp_rho", "zcdp_epsilon",
                     "subsampled_gaussian_delta", "max_iterations", "spent.epsilon"}
    # the parametrisation below follows tests/data; a longer live file means the copy is stale
    assert len(reference_entries) == len(_LOCAL), "tests/data/accounting_reference.json is out of date"


@pytest.mark.parametrize("index", range(len(_LOCAL)), ids=[_entry_id(e) for e in _LOCAL])
def test_reference_value(reference_entries, index):
    # Parametrised over the bundled copy (stable ids); the values checked come from the fixture,
    # i.e. the live held file when it is present.
    entry = reference_entries[index]
    value = _evaluate(entry["call"], entry["args"])
    assert _within(value, entry["value"], entry["tolerance"]), (
        f"{entry['call']}({entry['args']}) = {value!r}, held {entry['value']!r} ± {entry['tolerance']}"
    )
