"""Demonstration: ``python -m dpmcmc.demo``.

Prints how many iterations per chain each accountant allows DP penalty and DP-HMC with the
papers' settings (n = 100000, δ = 0.1/n, τ = 0.1, τ_g = 0.55, L = 25, 4 chains): the
comparison of thesis Fig. 6.1. The tight Gaussian PLD bound allows markedly more iterations
than the RDP and zCDP conversions at every ε.
"""
from __future__ import annotations

import sys

from . import accounting

__all__ = ["print_budget_table", "budget_rows", "main"]

N = 100_000
DELTA = 0.1 / N
CHAINS = 4
EPSILONS = (1.0, 2.0, 4.0, 6.0, 10.0)
SETTINGS = {
    "dp-penalty": {"tau": 0.1},
    "dp-hmc": {"tau_l": 0.1, "tau_g": 0.55, "leapfrog_steps": 25},
}


def budget_rows(
    epsilons=EPSILONS, n: int = N, delta: float = DELTA, chains: int = CHAINS, settings: dict = SETTINGS
) -> list[dict]:
    """Iterations per chain for each algorithm, ε and accountant.

    Returns
    -------
    list of dict
        One row per (algorithm, ε) with keys ``algorithm``, ``epsilon`` and one key per
        accountant (its iterations per chain; 0 where the budget is too small).
    """
    rows = []
    for algorithm, params in settings.items():
        for eps in epsilons:
            row = {"algorithm": algorithm, "epsilon": eps}
            for acc in accounting.supported_accountants(algorithm):
                try:
                    row[acc] = accounting.max_iterations(
                        algorithm, eps, delta, n, chains=chains, accountant=acc, **params
                    )
                except ValueError as err:
                    if "budget too small" not in str(err):
                        raise
                    row[acc] = 0
            rows.append(row)
    return rows


def print_budget_table(file=None, **kwargs) -> None:
    """Print the accountant comparison table (rich) for DP penalty and DP-HMC.

    Parameters
    ----------
    file : file-like, optional
        Where to print (default: standard output).
    **kwargs
        Passed to :func:`budget_rows` (``epsilons``, ``n``, ``delta``, ``chains``, ``settings``).
    """
    from rich.console import Console
    from rich.table import Table

    n = kwargs.get("n", N)
    delta = kwargs.get("delta", DELTA)
    chains = kwargs.get("chains", CHAINS)
    settings = kwargs.get("settings", SETTINGS)
    rows = budget_rows(**kwargs)
    console = Console(file=file or sys.stdout, width=110)
    settings_text = "; ".join(
        f"{alg}: " + ", ".join(f"{k} = {v}" for k, v in params.items()) for alg, params in settings.items()
    )
    console.print(f"Iterations per chain allowed by each accountant (n = {n}, δ = {delta:g}, {chains} chains)")
    console.print(settings_text)
    table = Table()
    table.add_column("algorithm")
    table.add_column("ε", justify="right")
    for acc in accounting.ACCOUNTANTS:
        table.add_column(acc, justify="right")
    table.add_column("pld / zcdp", justify="right")
    for row in rows:
        ratio = f"{row['pld'] / row['zcdp']:.2f}" if row.get("zcdp") else "—"
        table.add_row(
            row["algorithm"],
            f"{row['epsilon']:g}",
            *(str(row.get(acc, "—")) for acc in accounting.ACCOUNTANTS),
            ratio,
        )
    console.print(table)


def main() -> None:
    """Run the demonstration."""
    print_budget_table()


if __name__ == "__main__":
    main()
