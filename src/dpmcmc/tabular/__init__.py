"""Regression on a table: the data holder's path (docs/tabular.md).

- :mod:`~dpmcmc.tabular.schema` — the declared schema (public bounds and categories), reading
  the table as declared, and the scaled design (every cell mapped into the declared box; no
  value is ever refused).
- :mod:`~dpmcmc.tabular.front` — :func:`glm` (``dpmcmc.glm``, ``dpmcmc sample FILE``): the
  design, then the same request → plan → run → package as :func:`dpmcmc.sample`, the draws
  mapped back to the original scale; the samplers' defaults from the declared bounds.

The default inference, the noise-aware GLM, is an algorithm like any other
(:mod:`dpmcmc.samplers.noise_aware_glm`).
"""
from .front import DEFAULT_PRIOR_SD, glm, sampler_defaults
from .schema import (DEFAULT_PARAM_RADIUS, MODELS, Design, DesignLayout, default_clips, design,
                     design_layout, parse_schema, read_table, table_columns, to_original_scale)

__all__ = ["glm", "Design", "DesignLayout", "design", "design_layout", "read_table",
           "table_columns", "parse_schema", "to_original_scale", "default_clips",
           "sampler_defaults", "MODELS", "DEFAULT_PRIOR_SD", "DEFAULT_PARAM_RADIUS"]
