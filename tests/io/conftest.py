"""Fixtures the dataset tests share with the data tests."""

from tests.data.conftest import prose_folder  # noqa: F401  (a pytest fixture)
