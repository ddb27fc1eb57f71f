"""A privacy budget ledger per data set: compose the runs, refuse one that would overspend.

A data holder who runs ``dpmcmc sample`` several times on the same table spends the sum of the
runs' budgets. :class:`Ledger` keeps that sum in a small JSON file next to the data and refuses,
before any data are touched, a run that would take the total above a declared limit.

Composition rule: basic composition — ε adds up and δ adds up. It holds for any mechanisms,
including runs chosen adaptively after seeing earlier results (Dwork & Roth 2014, Thm 3.16 and
its adaptive form), which is how a ledger is used. It is loose when many runs are composed
(advanced composition or a PLD over all runs would be tighter) but it is never wrong, and it
needs nothing from the runs but their (ε, δ).

A run is charged when it starts, not when it ends: once noise has been drawn on the data the
budget is spent, even if the run is interrupted afterwards. A checkpointed run that resumes is
not charged again.

Keys. A run with a key (or seed) the user chose draws the same underlying noise as every other
run with that key: two such runs on one table can be combined to cancel the noise, whatever
their (ε, δ) add up to. The ledger therefore keeps a keyed hash (HMAC-SHA256 under a random
secret stored in the file) of every user-chosen key it has charged, and refuses a run with a
key it has seen before any noise is drawn. The file is thus as secret as the keys: it is
written with permissions 0o600.

The file is rewritten atomically (temporary file + ``os.replace``) under an exclusive lock
(``fcntl.flock`` on POSIX), so two processes sharing a ledger cannot both take the last of the
budget.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import hmac
import json
import math
import os
import secrets
import tempfile
from typing import Any, Iterator, Optional, Sequence

from .accounting._checks import check_positive, check_probability

__all__ = ["Ledger", "LedgerError", "open_ledger"]

_FORMAT = "dpmcmc-ledger"
_VERSION = 1
# Relative slack for the floating-point sum of ε's and δ's (a run that exactly fills the
# remaining budget must be accepted).
_RTOL = 1e-12


class LedgerError(ValueError):
    """A ledger refused a run, or its file is unreadable or inconsistent."""


def _check_total(name: str, value: Any, probability: bool) -> float:
    return check_probability(name, value) if probability else check_positive(name, value)


class Ledger:
    """The privacy budget of one data set across runs, kept in a JSON file.

    Parameters
    ----------
    path : path-like
        The ledger file. Created if missing (then ``total_epsilon`` and ``total_delta`` are
        required); otherwise read, and totals given must equal the declared ones.
    total_epsilon : float, optional
        ε the data set may spend over all runs (> 0).
    total_delta : float, optional
        δ the data set may spend over all runs, in (0, 1).

    Examples
    --------
    >>> import dpmcmc, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "hi.ledger.json")
    >>> ledger = dpmcmc.Ledger(path, total_epsilon=8.0, total_delta=1e-5)
    >>> ledger.check(4.0, 1e-6)   # would fit
    >>> ledger.remaining
    (8.0, 1e-05)
    """

    def __init__(self, path: str | os.PathLike, total_epsilon: Optional[float] = None,
                 total_delta: Optional[float] = None):
        self.path = os.fspath(path)
        if total_epsilon is not None:
            total_epsilon = _check_total("total_epsilon", total_epsilon, False)
        if total_delta is not None:
            total_delta = _check_total("total_delta", total_delta, True)
        if os.path.exists(self.path):
            state = self._read()
            declared = state["total"]
            for name, given, have in (("total_epsilon", total_epsilon, declared["epsilon"]),
                                      ("total_delta", total_delta, declared["delta"])):
                if given is not None and given != have:
                    raise LedgerError(f"{name}={given!r} differs from the total {have!r} declared in the "
                                      f"ledger {self.path!r}; a ledger's totals cannot be changed")
        else:
            if total_epsilon is None or total_delta is None:
                raise LedgerError(f"ledger {self.path!r} does not exist: give total_epsilon and total_delta "
                                  "to create it")
            state = {"format": _FORMAT, "version": _VERSION,
                     "total": {"epsilon": total_epsilon, "delta": total_delta}, "runs": [],
                     "secret": secrets.token_hex(32), "keys": []}
            with self._locked():
                if not os.path.exists(self.path):
                    self._write(state)
        self._state = self._read()

    # ---------------------------------------------------------------- reading and writing
    def _read(self) -> dict:
        try:
            with open(self.path) as f:
                state = json.load(f)
        except (OSError, ValueError) as err:
            raise LedgerError(f"cannot read ledger {self.path!r}: {err}") from None
        if not isinstance(state, dict) or state.get("format") != _FORMAT or state.get("version") != _VERSION:
            raise LedgerError(f"{self.path!r} is not a dpmcmc ledger (format {_FORMAT!r}, version {_VERSION})")
        try:
            total = state["total"]
            eps, dlt = float(total["epsilon"]), float(total["delta"])
            runs = state["runs"]
            for run in runs:
                e, d = float(run["epsilon"]), float(run["delta"])
                if not (math.isfinite(e) and e >= 0 and 0 <= d < 1):
                    raise ValueError("a run with an invalid (epsilon, delta)")
            if "secret" in state:
                bytes.fromhex(state["secret"])
            if not all(isinstance(k, str) for k in state.get("keys", [])):
                raise ValueError("a key hash that is not a string")
        except (KeyError, TypeError, ValueError) as err:
            raise LedgerError(f"ledger {self.path!r} is corrupted: {err}") from None
        if not (eps > 0 and 0 < dlt < 1):
            raise LedgerError(f"ledger {self.path!r} is corrupted: totals ({eps}, {dlt})")
        return state

    def _write(self, state: dict) -> None:
        folder = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(prefix=".ledger-", dir=folder)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(state, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock_path = self.path + ".lock"
        with open(lock_path, "a") as lock:
            try:
                import fcntl
            except ImportError:  # not POSIX: atomic replace only
                yield
                return
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    # ---------------------------------------------------------------- the budget
    @property
    def total(self) -> tuple[float, float]:
        """The declared (ε, δ) of the data set."""
        t = self._state["total"]
        return float(t["epsilon"]), float(t["delta"])

    @property
    def runs(self) -> list[dict]:
        """The charged runs, oldest first (copies)."""
        return [dict(r) for r in self._state["runs"]]

    @property
    def spent(self) -> tuple[float, float]:
        """(Σ ε, Σ δ) of the charged runs: basic composition."""
        runs = self._state["runs"]
        return (math.fsum(float(r["epsilon"]) for r in runs), math.fsum(float(r["delta"]) for r in runs))

    @property
    def remaining(self) -> tuple[float, float]:
        """What is left of the declared totals (never negative)."""
        (te, td), (se, sd) = self.total, self.spent
        return max(te - se, 0.0), max(td - sd, 0.0)

    def _refusal(self, state: dict, epsilon: float, delta: float) -> Optional[str]:
        te, td = float(state["total"]["epsilon"]), float(state["total"]["delta"])
        se = math.fsum(float(r["epsilon"]) for r in state["runs"])
        sd = math.fsum(float(r["delta"]) for r in state["runs"])
        if se + epsilon > te * (1 + _RTOL) or sd + delta > td * (1 + _RTOL):
            return (f"ledger {self.path!r} refuses a run of ε = {epsilon:.6g}, δ = {delta:.3g}: "
                    f"{len(state['runs'])} run(s) have spent ε = {se:.6g}, δ = {sd:.3g} of the declared "
                    f"total ε = {te:g}, δ = {td:g} (remaining ε = {max(te - se, 0):.6g}, "
                    f"δ = {max(td - sd, 0):.3g})")
        return None

    def check(self, epsilon: float, delta: float) -> None:
        """Raise :class:`LedgerError` if a run of (ε, δ) would exceed the declared totals.

        Reads the file again first, so runs charged by other processes count.
        """
        epsilon = check_positive("epsilon", epsilon)
        delta = check_probability("delta", delta)
        self._state = self._read()
        reason = self._refusal(self._state, epsilon, delta)
        if reason:
            raise LedgerError(reason)

    def charge(self, report: Any = None, *, epsilon: Optional[float] = None, delta: Optional[float] = None,
               label: str = "", keys: Sequence[bytes] = ()) -> dict:
        """Record a run, or raise :class:`LedgerError` (and record nothing) if it does not fit
        or reuses a key.

        Parameters
        ----------
        report : PrivacyReport, optional
            The run's report (its ``epsilon``, ``delta``, ``algorithm``, ``n`` are recorded).
        epsilon, delta : float, optional
            Instead of ``report``.
        label : str
            Free text kept with the entry.
        keys : sequence of bytes
            What fixes the run's privacy noise when the user chose it (a key's raw words,
            :func:`dpmcmc._keys.key_material`, or a secure-mode secret): refused if the ledger
            has charged any of them before, else recorded as a keyed hash. Empty for a run whose
            noise comes from fresh OS entropy.

        Returns
        -------
        dict
            The entry written.
        """
        if report is not None:
            if epsilon is not None or delta is not None:
                raise TypeError("give report or (epsilon, delta), not both")
            epsilon, delta = report.epsilon, report.delta
            extra = {"algorithm": report.algorithm, "n": report.n, "accountant": report.accountant}
        else:
            if epsilon is None or delta is None:
                raise TypeError("charge needs a report or both epsilon and delta")
            extra = {}
        epsilon = check_positive("epsilon", epsilon)
        delta = check_probability("delta", delta)
        entry = {"epsilon": epsilon, "delta": delta, **extra, "label": str(label),
                 "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        keys = [bytes(k) for k in keys]
        with self._locked():
            state = self._read()
            reason = self._refusal(state, epsilon, delta)
            if keys:
                if "secret" not in state:  # a ledger written before keys were recorded
                    state["secret"] = secrets.token_hex(32)
                digests = [_key_digest(state["secret"], k) for k in keys]
                if any(dg in state.get("keys", ()) for dg in digests):
                    reason = (f"ledger {self.path!r} refuses the run: its key (or seed) was used "
                              "by a run already charged to this ledger, so the privacy noise "
                              "would repeat that run's and the two could be combined to cancel "
                              "it. Use a fresh key or seed, or none (OS entropy).")
            if reason:
                self._state = state
                raise LedgerError(reason)
            state["runs"].append(entry)
            if keys:
                state.setdefault("keys", []).extend(digests)
            self._write(state)
            self._state = state
        return dict(entry)

    def __repr__(self) -> str:
        (te, td), (se, sd) = self.total, self.spent
        return (f"Ledger({self.path!r}: spent ε = {se:.6g} of {te:g}, δ = {sd:.3g} of {td:g}, "
                f"{len(self._state['runs'])} run(s))")


def _key_digest(secret_hex: str, material: bytes) -> str:
    return hmac.new(bytes.fromhex(secret_hex), material, hashlib.sha256).hexdigest()


def open_ledger(ledger: Any) -> Optional[Ledger]:
    """``None``, a :class:`Ledger`, or the path of an existing ledger file → a Ledger or None."""
    if ledger is None or isinstance(ledger, Ledger):
        return ledger
    if isinstance(ledger, (str, os.PathLike)):
        if not os.path.exists(ledger):
            raise LedgerError(f"ledger: no ledger file {os.fspath(ledger)!r}; create it with "
                              "dpmcmc.Ledger(path, total_epsilon, total_delta) or `dpmcmc ledger init`")
        return Ledger(ledger)
    raise TypeError(f"ledger must be a dpmcmc.Ledger or a path, got {type(ledger).__name__}")
