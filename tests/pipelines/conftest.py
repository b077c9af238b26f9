"""Fixtures the pipeline tests share with the data tests."""

from tests.data.conftest import prose_folder, wikiextractor_folder  # noqa: F401  (fixtures)
