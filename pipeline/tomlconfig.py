"""Read a TOML file into a pydantic model; every problem becomes one `SieveError` line naming
the file and the offending key (`curate.toml: screen_gg: extra inputs are not permitted`)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from pipeline.errors import SieveError

M = TypeVar("M", bound=BaseModel)


def first_error(exc: ValidationError) -> str:
    """`key.path: message` of the first validation error, on one line."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    msg = first["msg"].removeprefix("Value error, ")
    return f"{where}: {msg[:1].lower()}{msg[1:]}"


def load_toml(path: str | Path, model: type[M]) -> M:
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SieveError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SieveError(f"{path}: is a directory, not a TOML file") from None
    except UnicodeDecodeError as exc:
        raise SieveError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise SieveError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SieveError(f"{path}: invalid TOML ({exc})") from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise SieveError(f"{path}: {first_error(exc)}") from None
