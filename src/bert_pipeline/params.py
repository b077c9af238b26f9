"""The one way a parameters dict becomes a typed object: OmegaConf structured configs.

`parse_params` merges the dict into a dataclass schema: OmegaConf resolves interpolations,
converts types ("5e-5" -> 5e-05), refuses unknown keys and names the full parameter path of any
bad value; the dataclass's `check(root)` then tests the ranges, raising through `require`.
Pretraining, the data stages and every fine-tuning task use it; it imports no ML framework, so
the Dask workers of the data stages can use it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

T = TypeVar("T")


class ConfigError(ValueError):
    """A parameter with an unusable value or an unknown name; the message names its path."""


def parse_params(schema: type[T], params: Mapping[str, Any] | None, root: str) -> T:
    """`params` as an instance of the dataclass `schema`; errors name `<root>.<path>`."""
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.create(dict(params or {})))
        value = OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        key = f"{root}.{exc.full_key}" if getattr(exc, "full_key", None) else root
        reason = str(exc).splitlines()[0]
        raise ConfigError(f"parameter {key}: {reason}") from None
    check = getattr(value, "check", None)
    if check is not None:
        check(root)
    return value


def require(ok: bool, root: str, name: str, why: str, value: Any) -> None:
    """The one way a `check` refuses a value: `parameter <root>.<name>=<value> <why>`."""
    if not ok:
        raise ConfigError(f"parameter {root}.{name}={value!r} {why}")
