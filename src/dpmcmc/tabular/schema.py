"""The declared schema of a table and the design built from it: public declarations only.

A table is read, column by column, as its declarations say (:func:`read_table`,
:func:`table_columns`); :func:`design_layout` checks the declarations against the column names
and lays the design out (which columns make which terms, their public scaling);
:meth:`DesignLayout.design` reads the values, the only place that does, and maps every cell
into the declared box: it never refuses a value (docs/tabular.md). Nothing here infers.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np

__all__ = ["MODELS", "parse_schema", "table_columns", "read_table", "Design", "DesignLayout",
           "design_layout", "design", "to_original_scale", "default_clips",
           "DEFAULT_PARAM_RADIUS"]

MODELS = ("logistic", "linear", "poisson")
DEFAULT_PARAM_RADIUS = 10.0


# ------------------------------------------------------------------------------ the schema

@dataclass(frozen=True)
class _Numeric:
    lo: float
    hi: float
    impute: Optional[float] = None


@dataclass(frozen=True)
class _Categorical:
    categories: tuple
    impute: Any = None


def parse_schema(bounds: Mapping[str, Any]) -> dict:
    """Validate the declared schema (the ``bounds`` mapping) and return it parsed.

    Each entry is one of::

        "age": [18, 90]                                    # numeric range [lo, hi]
        "age": {"bounds": [18, 90], "impute": 40}          # with a public imputation value
        "student": {"categories": ["No", "Yes"]}           # categorical; first level = reference
        "student": {"categories": ["No", "Yes"], "impute": "No"}

    Raises
    ------
    TypeError, ValueError
        Naming the column whose declaration is malformed.
    """
    if not isinstance(bounds, Mapping):
        raise TypeError(f"bounds must be a mapping column -> [lo, hi] or {{'categories': [...]}}, "
                        f"got {type(bounds).__name__}")
    out = {}
    for col, spec in bounds.items():
        if not isinstance(col, str):
            raise TypeError(f"bounds: column names must be strings, got {col!r}")
        impute = None
        if isinstance(spec, Mapping):
            unknown = set(spec) - {"bounds", "categories", "impute"}
            if unknown:
                raise ValueError(f"bounds[{col!r}]: unknown key(s) {sorted(unknown)}; use "
                                 "'bounds', 'categories', 'impute'")
            if ("bounds" in spec) == ("categories" in spec):
                raise ValueError(f"bounds[{col!r}]: give exactly one of 'bounds' and 'categories'")
            impute = spec.get("impute")
            if "categories" in spec:
                cats = spec["categories"]
                if isinstance(cats, str) or not isinstance(cats, Sequence) or len(cats) < 2:
                    raise ValueError(f"bounds[{col!r}]: 'categories' must list at least two levels, "
                                     f"got {cats!r}")
                if len(set(cats)) != len(cats):
                    raise ValueError(f"bounds[{col!r}]: 'categories' has repeated levels: {cats!r}")
                if impute is not None and impute not in cats:
                    raise ValueError(f"bounds[{col!r}]: impute value {impute!r} is not a declared "
                                     f"category {list(cats)!r}")
                out[col] = _Categorical(tuple(cats), impute)
                continue
            spec = spec["bounds"]
        if isinstance(spec, str) or not isinstance(spec, Sequence) or len(spec) != 2:
            raise ValueError(f"bounds[{col!r}]: expected [lo, hi], got {spec!r}")
        try:
            lo, hi = float(spec[0]), float(spec[1])
        except (TypeError, ValueError):
            raise ValueError(f"bounds[{col!r}]: lo and hi must be numbers, got {spec!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"bounds[{col!r}]: need finite lo < hi, got [{lo}, {hi}]")
        if impute is not None:
            if isinstance(impute, bool) or not isinstance(impute, (int, float)) or not lo <= impute <= hi:
                raise ValueError(f"bounds[{col!r}]: impute must be a number in [{lo}, {hi}], got {impute!r}")
            impute = float(impute)
        out[col] = _Numeric(lo, hi, impute)
    return out


# ------------------------------------------------------------------------------ the table

_CSV = (".csv", ".csv.gz", ".txt")
_PARQUET = (".parquet", ".pq")


def _path_kind(table: Any) -> Optional[str]:
    """``"csv"``, ``"parquet"`` for a path to such a file, else None (raises for other paths)."""
    if not isinstance(table, (str, os.PathLike)):
        return None
    path = os.fspath(table)
    if not os.path.isfile(path):
        raise ValueError(f"table: no file at {path!r}")
    low = path.lower()
    if low.endswith(_PARQUET):
        return "parquet"
    if low.endswith(_CSV):
        return "csv"
    raise ValueError(f"table: {path!r} is neither CSV (.csv) nor Parquet (.parquet, .pq)")


def table_columns(table: Any) -> list:
    """The column names of ``table`` (a CSV file's header, a Parquet file's schema): public
    facts about the table that :func:`glm` checks the declarations against before any value
    is read."""
    import pandas as pd

    kind = _path_kind(table)
    if kind == "csv":
        return [str(c) for c in pd.read_csv(os.fspath(table), nrows=0).columns]
    if kind == "parquet":
        import pyarrow.parquet as pq

        return [str(c) for c in pq.read_schema(os.fspath(table)).names]
    return [str(c) for c in _as_frame(table).columns]


def _as_frame(table: Any):
    import pandas as pd

    if isinstance(table, pd.DataFrame):
        return table
    if hasattr(table, "to_pandas"):
        return table.to_pandas()
    raise TypeError(f"table must be a pandas DataFrame, a polars DataFrame or a CSV/Parquet path, "
                    f"got {type(table).__name__}")


def read_table(table: Any, columns: Optional[Sequence[str]] = None):
    """Return the ``columns`` of ``table`` (default all) as a pandas DataFrame.

    Accepts a pandas DataFrame, anything with ``to_pandas()`` (polars), or a path to a CSV
    (``.csv``, ``.csv.gz``, ``.txt``) or Parquet (``.parquet``, ``.pq``) file. Only the named
    columns are read. A CSV file is read as text, cell by cell, with no guessing of types or
    missing-value markers: ``"None"``, ``"NA"`` or ``"nan"`` stay those strings, so a declared
    category with such a name is that category, and the declarations alone decide how each
    cell is parsed (:func:`design`).
    """
    import pandas as pd

    cols = None if columns is None else [str(c) for c in columns]
    kind = _path_kind(table)
    if kind == "csv":
        return pd.read_csv(os.fspath(table), usecols=cols, dtype=str, keep_default_na=False,
                           na_filter=False)
    if kind == "parquet":
        return pd.read_parquet(os.fspath(table), columns=cols)
    df = _as_frame(table)
    if cols is None:
        return df
    df = df.rename(columns=str)
    return df[cols]

def _text(value) -> Optional[str]:
    """The text a cell or a declared level matches by: strings as they are, integer-valued
    numbers in integer form (``1``, ``1.0`` and ``"1"`` all read ``"1"``), booleans as
    ``"True"``/``"False"``; ``None`` for a missing cell (None, NaN, pandas' NA)."""
    if isinstance(value, str):
        return value
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(f):
        return None
    if math.isfinite(f) and f == round(f) and abs(f) < 2.0 ** 53:
        return str(int(f))
    return repr(f)


def _numbers(series) -> np.ndarray:
    """The cells of a column declared numeric, as float64: NaN where a cell is missing or not
    a number (it is then imputed), ±inf kept (clipped like any out-of-range value)."""
    import pandas as pd

    if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_numeric_dtype(series.dtype):
        return pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    text = series.astype(object).map(lambda v: v.strip() if isinstance(v, str) else v)
    return pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def _numeric_column(series, spec: _Numeric) -> np.ndarray:
    """A numeric column clipped into its declared range; a missing or unreadable cell takes the
    declared imputation value, else the range's midpoint (public either way)."""
    v = _numbers(series)
    fill = spec.impute if spec.impute is not None else 0.5 * (spec.lo + spec.hi)
    v = np.where(np.isnan(v), fill, v)
    # Clipping bounds each record's influence (±inf included); nothing is dropped or refused.
    return np.clip(v, spec.lo, spec.hi)


def _one_hot(series, spec: _Categorical) -> np.ndarray:
    """(n, levels) indicators of a categorical column (column k: the cell is level k).

    A missing cell, or a value outside the declared categories, takes the declared imputation
    level, else the centre of the declared domain: every indicator ½ (0 once scaled; for a
    two-class target, y = ½). Never an error, so that no single record's value decides whether
    the table is refused (docs/tabular.md).
    """
    cats = spec.categories
    text = np.asarray([_text(v) for v in series.to_numpy(dtype=object)], dtype=object)
    out = np.zeros((len(text), len(cats)))
    matched = np.zeros(len(text), dtype=bool)
    for k, level in enumerate(cats):
        hit = (text == _text(level)) & ~matched
        out[hit, k] = 1.0
        matched |= hit
    if spec.impute is not None:
        out[~matched, cats.index(spec.impute)] = 1.0
    else:
        out[~matched] = 0.5
    return out


@dataclass(frozen=True)
class Design:
    """A design built from public declarations.

    Attributes
    ----------
    data : ndarray (n, d + 2)
        Records ``(1, x_s..., y)``: intercept column, covariates scaled to [-1, 1], target
        (logistic: in [0, 1], 0/1 for a declared class; linear: clipped and scaled to [-1, 1];
        Poisson: the count clipped to its declared cap, [0, C], not scaled).
    names : tuple of str
        ``("intercept", term, ...)``, one per coefficient.
    mid, half : ndarray (d,)
        Centre and half-width of each covariate's declared range (0/1 indicators: 0.5, 0.5).
    target_mid, target_half : float
        The same for a linear model's target (0 and 1 for logistic and Poisson).
    """

    data: np.ndarray
    names: tuple
    mid: np.ndarray
    half: np.ndarray
    target_mid: float = 0.0
    target_half: float = 1.0


@dataclass(frozen=True)
class DesignLayout:
    """Which columns make which terms, and their public scaling: from the declarations and the
    column names only (no data value)."""

    model: str
    target: str
    features: tuple
    schema: dict
    names: tuple
    mid: np.ndarray
    half: np.ndarray
    target_mid: float
    target_half: float

    @property
    def columns(self) -> tuple:
        """The columns read from the table: the target, then the covariates."""
        return (self.target, *self.features)

    @property
    def count_cap(self) -> Optional[int]:
        """Poisson: the declared cap C of the counts (the target's declared ``[0, C]``)."""
        return int(self.schema[self.target].hi) if self.model == "poisson" else None

    def design(self, df) -> Design:
        """The records ``(1, x_s..., y)`` of ``df``: the only place data values are read.

        Every cell maps to a point of the declared box whatever its value (clipped, or imputed
        when missing or unreadable), so this never raises on a value (docs/tabular.md).
        """
        cols = []
        for col in self.features:
            spec = self.schema[col]
            if isinstance(spec, _Numeric):
                mid, half = (spec.lo + spec.hi) / 2, (spec.hi - spec.lo) / 2
                cols.append((_numeric_column(df[col], spec) - mid) / half)
            else:
                cols.extend(2.0 * ind - 1.0 for ind in _one_hot(df[col], spec).T[1:])
        tspec = self.schema[self.target]
        if isinstance(tspec, _Categorical):
            y = _one_hot(df[self.target], tspec)[:, 1]
        elif self.model in ("logistic", "poisson"):  # declared [0, 1] / [0, C]: not scaled
            y = _numeric_column(df[self.target], tspec)
        else:
            y = (_numeric_column(df[self.target], tspec) - self.target_mid) / self.target_half
        data = np.column_stack([np.ones(len(df)), *cols, y]).astype(np.float64)
        return Design(data=data, names=self.names, mid=self.mid, half=self.half,
                      target_mid=self.target_mid, target_half=self.target_half)


def _check_count_target(target: str, tspec) -> None:
    """A Poisson target is a count with a declared cap C: bounds ``[0, C]``, C a positive
    integer (counts above C are clipped to C; C + 1 bounds each record's influence)."""
    ok = (isinstance(tspec, _Numeric) and tspec.lo == 0.0 and tspec.hi >= 1.0
          and tspec.hi == math.floor(tspec.hi))
    if not ok:
        got = (f"[{tspec.lo:g}, {tspec.hi:g}]" if isinstance(tspec, _Numeric)
               else f"categories {list(tspec.categories)!r}")
        raise ValueError(f"bounds[{target!r}]: a poisson target is a count with a declared cap: "
                         f"give [0, C] with C a positive integer (counts above C are clipped to "
                         f"C), got {got}")


def design_layout(columns: Sequence[str], model: str, target: str,
                  features: Optional[Sequence[str]], bounds: Mapping[str, Any]) -> DesignLayout:
    """Check the declarations against the table's column names and lay the design out.

    Every refusal here depends on the arguments and the column names only, never on a value.
    """
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    schema = parse_schema(bounds)
    if not isinstance(target, str):
        raise TypeError(f"target must be a column name, got {type(target).__name__}")
    columns = [str(c) for c in columns]
    if target not in columns:
        raise ValueError(f"target: column {target!r} is not in the table (columns: {columns})")
    if features is None:
        features = [c for c in columns if c != target]
    elif isinstance(features, str):
        features = [f.strip() for f in features.split(",") if f.strip()]
    features = list(features)
    if not features:
        raise ValueError("features: need at least one covariate column")
    if len(set(features)) != len(features) or target in features:
        raise ValueError(f"features must be distinct columns other than the target, got {features}")
    for col in [target, *features]:
        if col not in columns:
            raise ValueError(f"features: column {col!r} is not in the table (columns: {columns})")
        if col not in schema:
            raise ValueError(f"bounds: column {col!r} has no declared bounds or categories; the "
                             "ranges must be declared (public), never read from the data")
    tspec = schema[target]
    if model == "logistic" and not (
            (isinstance(tspec, _Categorical) and len(tspec.categories) == 2)
            or (isinstance(tspec, _Numeric) and (tspec.lo, tspec.hi) == (0.0, 1.0))):
        raise ValueError(f"bounds[{target!r}]: a logistic target needs two declared classes, "
                         "e.g. {\"categories\": [\"No\", \"Yes\"]} (the second is 1), or the "
                         "bounds [0, 1] of a 0/1 column")
    if model == "linear" and not isinstance(tspec, _Numeric):
        raise ValueError(f"bounds[{target!r}]: a linear target needs declared bounds [lo, hi]")
    if model == "poisson":
        _check_count_target(target, tspec)
    names, mids, halves = ["intercept"], [], []
    for col in features:
        spec = schema[col]
        if isinstance(spec, _Numeric):
            names.append(col)
            mids.append((spec.lo + spec.hi) / 2)
            halves.append((spec.hi - spec.lo) / 2)
        else:
            # One indicator per non-reference level, bounds [0, 1] -> scaled to {-1, 1}.
            for level in spec.categories[1:]:
                names.append(f"{col}[{level}]")
                mids.append(0.5)
                halves.append(0.5)
    from ..models.base import check_param_names

    check_param_names(names, len(names), "features (term names)")
    tmid, thalf = 0.0, 1.0
    if model == "linear":
        tmid, thalf = (tspec.lo + tspec.hi) / 2, (tspec.hi - tspec.lo) / 2
    return DesignLayout(model, target, tuple(features), schema, tuple(names),
                        np.asarray(mids, dtype=np.float64), np.asarray(halves, dtype=np.float64),
                        tmid, thalf)


def design(table: Any, model: str, target: str, features: Optional[Sequence[str]],
           bounds: Mapping[str, Any]) -> Design:
    """Build the scaled design from a table and its declared schema; see the module docstring.

    The declarations are checked against the column names (:func:`design_layout`) before any
    value is read; then only the target and the covariates are read, and every value maps into
    the declared box (clipped, or imputed when missing or unreadable): no value is refused.
    """
    layout = design_layout(table_columns(table), model, target, features, bounds)
    df = read_table(table, layout.columns)
    if len(df) < 1:
        raise ValueError("table has no rows")
    return layout.design(df)


def to_original_scale(beta_s: Any, mid: Any, half: Any, target_mid: float = 0.0,
                      target_half: float = 1.0) -> np.ndarray:
    """Map coefficients of the scaled design back to the original covariate scale.

    With ``x_s = (x − mid)/half`` and ``y_s = (y − target_mid)/target_half`` (logistic: 0, 1)::

        β_j       = target_half · β_s_j / half_j
        intercept = target_mid + target_half · (β_s0 − Σ_j β_s_j · mid_j / half_j)

    Parameters
    ----------
    beta_s : array (..., 1 + d)
        Intercept first. Any leading axes (chains, draws).
    """
    b = np.asarray(beta_s, dtype=np.float64)
    mid, half = np.asarray(mid, dtype=np.float64), np.asarray(half, dtype=np.float64)
    slopes = b[..., 1:] / half
    intercept = b[..., 0] - np.sum(slopes * mid, axis=-1)
    out = np.concatenate([intercept[..., None], slopes], axis=-1) * target_half
    out[..., 0] += target_mid
    return out


def default_clips(model: str, d: int, noise_sd: float = 0.5,
                  param_radius: float = DEFAULT_PARAM_RADIUS, *,
                  count_cap: Optional[int] = None) -> tuple[float, float]:
    """Default ``(clip, grad_clip)`` of dp-hmc for a design with ``d`` scaled covariates.

    Every record has ``x̃ = (1, x_s)`` with ``x_s ∈ [-1, 1]^d``, so ``‖x̃‖ ≤ √(1+d)``.

    * logistic: ``∇ℓ = (y − σ(x̃ᵀθ)) x̃``, ``|y − σ| < 1``: the gradient norm is at most
      ``√(1+d)`` for every θ, and the log-likelihood ratio is ``√(1+d)``-Lipschitz in θ. Both
      clips equal ``√(1+d)``: nothing is clipped.
    * linear (Gaussian, scaled noise sd ``s``): ``∇ℓ = (y_s − x̃ᵀθ) x̃ / s²`` is unbounded in θ.
      On the ball ``‖θ‖ ≤ R`` (``param_radius``, declared) ``|y_s − x̃ᵀθ| ≤ 1 + √(1+d) R``, so
      both bounds are ``√(1+d) (1 + √(1+d) R) / s²``; outside the ball the clipping enforces
      them (the guarantee holds regardless; only the posterior is then approximate).
    * poisson (counts capped at ``C = count_cap``): ``∇ℓ = (y − e^{x̃ᵀθ}) x̃`` is unbounded in θ.
      On the public set where every log rate in the box is at most ``log(C + 1)`` (the noise-
      aware GLM's points, :func:`dpmcmc.samplers.noise_aware_glm.public_point`)
      ``|y − e^{x̃ᵀθ}| ≤ C + 1``, so both bounds are ``√(1+d) (C + 1)``; outside it the
      clipping enforces them, as for linear.
    """
    r = math.sqrt(1 + d)
    if model == "logistic":
        return r, r
    if model == "poisson":
        if count_cap is None:
            raise ValueError("count_cap: the poisson model's clips follow from its declared cap")
        return r * (count_cap + 1.0), r * (count_cap + 1.0)
    b = r * (1 + r * param_radius) / noise_sd ** 2
    return b, b
