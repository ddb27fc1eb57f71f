"""The child processes of test_ledger's race (``multiprocessing``, spawned).

A spawned child imports the module its target lives in: kept here, apart from the test module,
the child imports the ledger alone (no JAX, pandas or the CLI), about 1 CPU-s less per child.
"""
from dpmcmc.ledger import Ledger, LedgerError


def race(path, out):
    """Try to take ε = 0.6 of the ledger at ``path``; put whether it was granted on ``out``."""
    try:
        Ledger(path).charge(epsilon=0.6, delta=1e-7)
        out.put(True)
    except LedgerError:
        out.put(False)
