"""The child processes of test_ledger's race (``multiprocessing``).

The test spawns one child (a fresh interpreter, no JAX); it imports the module its target lives
in, kept here, apart from the test module, so that it imports the ledger alone (no JAX, pandas
or the CLI), and forks the two racers, which find the ledger imported: one interpreter start and
one import instead of one per racer (~1 CPU-s less).
"""
import multiprocessing as mp

from dpmcmc.ledger import Ledger, LedgerError


def race(path, out):
    """Try to take ε = 0.6 of the ledger at ``path``; put whether it was granted on ``out``."""
    try:
        Ledger(path).charge(epsilon=0.6, delta=1e-7)
        out.put(True)
    except LedgerError:
        out.put(False)


def race_two(path, out):
    """Fork two processes that :func:`race` for the ledger at ``path`` (this process holds no
    JAX, nothing but the ledger: forking it is safe); put their sorted outcomes on ``out``."""
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    procs = [ctx.Process(target=race, args=(path, results)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    out.put(sorted(results.get(timeout=5) for _ in procs))
