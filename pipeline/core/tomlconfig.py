"""Read a TOML file into a pydantic model; every problem becomes one `SieveError` line naming
the file and the offending key (`curate.toml: screen_gg: extra inputs are not permitted`,
`t.toml: grpo.lr must be a finite number > 0, got inf`).

The path must name a regular file of at most `MAX_CONFIG_BYTES`: it is checked with `os.stat`
before it is opened, then opened non-blocking (a FIFO swapped in meanwhile cannot hang the open)
and checked again with `fstat`, and at most the cap plus one byte is read, so `/dev/zero`, a FIFO
or a huge file is one error line, not unbounded memory or a hang. The values are validated by the
model (`grpo_core.validate.STRICT`: strict types, finite numbers, ranges).

The recipes Sieve ships (`RECIPES`: `pipeline/recipes/*.toml`, package data) are found through
the package, so an installed wheel has them wherever it runs; `data/configs` in a checkout is a
link to them. A config argument names a file, or one of those recipes by name (`recipe_file`):
`--config tiny_train` or `--config tiny_train.toml` reads the shipped one unless a file of that
name exists where the command runs.

Test: `pytest tests/cli/test_bad_configs.py` (every committed config file loads, each bad one
is one line).
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from grpo_core.validate import problem
from pipeline.core.errors import SieveError

M = TypeVar("M", bound=BaseModel)

MAX_CONFIG_BYTES = 1 << 20  # 1 MiB: the committed configs are about 2 KB
# the shipped recipes (pyproject's package-data); a wheel is installed unpacked, so they are files
RECIPES = Path(str(resources.files("pipeline").joinpath("recipes")))
CONFIGS = RECIPES  # the name `pipeline.selection.config` imports


def shipped_recipes() -> list[str]:
    """The names of the recipes Sieve ships (`tiny_train`, ...), sorted."""
    return sorted(p.stem for p in RECIPES.glob("*.toml"))


def recipe_file(name: str | Path) -> Path:
    """The file a config argument names: a path that exists, as given (a user's own recipe);
    else a bare name (`tiny_train.toml` or `tiny_train`) of a shipped recipe, from the package.
    A bare name that is neither is one SieveError line listing the shipped recipes; any other
    path is returned as given, and reading it reports what is wrong with it."""
    path = Path(name)
    if os.path.lexists(path) or path.parent != Path(".") or not path.name:
        return path
    shipped = RECIPES / (path.name if path.suffix == ".toml" else f"{path.name}.toml")
    if shipped.is_file():
        return shipped
    raise SieveError(
        f"{path}: no such file, nor a recipe Sieve ships ({', '.join(shipped_recipes())})"
    )


def first_error(exc: ValidationError, model: type | None = None) -> str:
    """The first validation error on one line (`grpo_core.validate.problem`)."""
    return problem(exc, model)


def read_config_text(path: Path) -> str:
    """The UTF-8 text of the config file at `path`; anything else is one SieveError line."""
    try:
        _check_kind(path, os.stat(path).st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise SieveError(f"{path}: no such file") from None
    except OSError as exc:
        raise SieveError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        _check_kind(path, info.st_mode)
        data = f.read(MAX_CONFIG_BYTES + 1)
    if max(info.st_size, len(data)) > MAX_CONFIG_BYTES:
        raise SieveError(
            f"{path}: {max(info.st_size, len(data)):,} bytes; a config file is at most "
            f"{MAX_CONFIG_BYTES:,} bytes"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SieveError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def _check_kind(path: Path, mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise SieveError(f"{path}: is a directory, not a TOML file")
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO (named pipe)"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "something other than a file"
        )
        raise SieveError(f"{path}: is {kind}, not a regular TOML file")


def load_toml(path: str | Path, model: type[M]) -> M:
    """The config file or shipped recipe `path` names (`recipe_file`) as a `model`."""
    file = recipe_file(path)
    return validate_toml(file, read_toml(file), model)


def read_toml(path: str | Path) -> dict[str, Any]:
    """The parsed TOML of the file or shipped recipe `path` names (`recipe_file`); unreadable or
    invalid is one SieveError line, and so is a shape no config has that would cost the parser
    unbounded time or memory (`check_shape`)."""
    path = recipe_file(path)
    text = read_config_text(path)
    check_shape(Path(path), text)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SieveError(f"{path}: invalid TOML ({exc})") from None
    except RecursionError:  # check_shape bounds nesting; a deeper stack is the parser's own
        raise SieveError(f"{path}: invalid TOML (nested too deeply to read)") from None
    except ValueError as exc:  # an integer past Python's 4,300-digit limit
        raise SieveError(f"{path}: invalid TOML ({' '.join(str(exc).split())[:200]})") from None


MAX_NESTING = 32  # arrays and inline tables inside each other (the configs nest 2 deep)
MAX_KEY_PARTS = 32  # parts of one dotted key or table name (the configs use 2)
MAX_BARE_CHARS = 1024  # characters of one key or bare value outside its quoted parts
# a TOML string (multi-line first), a comment, or a run of anything else
_TOKENS = re.compile(
    r'''"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'[^\'\n]*\'|#[^\n]*|[^"\'#]+|["\']'''
)
_MARKS = re.compile(r"[=,\n{}\[\]]")  # where a key or a bare value ends
_DEPTH = {"[": 1, "{": 1, "]": -1, "}": -1}


def check_shape(path: Path, text: str) -> None:
    """SieveError when `text` nests arrays or inline tables deeper than `MAX_NESTING`, or has a
    key of more than `MAX_KEY_PARTS` dotted parts, or a key or bare value of more than
    `MAX_BARE_CHARS` characters outside its quotes: Python's TOML parser recurses once per
    level (a 3,000-line RecursionError) and takes time and memory quadratic in a dotted key's
    parts (GBs for an 80 KB key), so these are refused from one scan of the text, before it is
    parsed. Strings and comments are skipped; nothing a config needs comes near the bounds."""
    depth = parts = chars = 0
    for token in _TOKENS.finditer(text):
        piece = token.group()
        if piece[0] in "\"'#":  # a string (part of a key, or a value) or a comment
            continue
        start = 0
        for mark in [*_MARKS.finditer(piece), None]:
            stretch = piece[start : mark.start() if mark else len(piece)]
            parts += stretch.count(".")
            chars += len(stretch.strip())
            if parts >= MAX_KEY_PARTS or chars > MAX_BARE_CHARS:
                raise SieveError(
                    f"{path}: a key or value of more than {MAX_KEY_PARTS} dotted parts or "
                    f"{MAX_BARE_CHARS} characters (outside quotes); a config has none"
                )
            if mark is None:
                break
            depth += _DEPTH.get(mark.group(), 0)
            if depth > MAX_NESTING:
                raise SieveError(
                    f"{path}: arrays or inline tables nested more than {MAX_NESTING} deep; "
                    "a config has none"
                )
            parts = chars = 0
            start = mark.end()


def validate_toml(path: Path, raw: dict[str, Any], model: type[M]) -> M:
    """`raw` (read from `path`) as a `model`; a bad value is one SieveError line naming it."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise SieveError(f"{path}: {first_error(exc, model)}") from None
