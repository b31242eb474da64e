"""A SQL expression as text (`Sql`) that the selection formulas run on, as they run on Polars.

A formula written with + − × / **, == and <=, | (OR), `abs()`, `.sqrt()`, `.exp()` and
`when(cond, a, b)` gives a Polars expression when its inputs are Polars expressions and DuckDB SQL
text when they are `Sql`, so `pipeline.selection.sql_macros` renders the ledger's macros from the
one Python definition.
Floats render exactly, as DOUBLE literals (`0.1e0`: DuckDB would read `0.1` as DECIMAL).

Test: `.venv/bin/pytest tests/store/test_sql_macros.py -q`.
"""

from __future__ import annotations

from typing import Any

import polars as pl


def literal(x: Any) -> str:
    """SQL text of a Python number (floats as DOUBLE literals, exactly) or of an `Sql`."""
    if isinstance(x, Sql):
        return x.text
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise TypeError(f"cannot render {x!r} as SQL")
    if isinstance(x, int):
        return str(x)
    text = repr(x) if "e" in repr(x) else f"{x!r}e0"  # 'e': DuckDB reads DOUBLE, not DECIMAL
    return f"({text})" if x < 0 else text


class Sql:
    """A SQL expression as text; arithmetic and comparisons build larger expressions."""

    __hash__ = None  # type: ignore[assignment]  # == builds SQL, so no hashing

    def __init__(self, text: str):
        self.text = text

    def _op(self, op: str, other: Any, swap: bool = False) -> Sql:
        left, right = (literal(other), self.text) if swap else (self.text, literal(other))
        return Sql(f"({left} {op} {right})")

    def __add__(self, o: Any) -> Sql:
        return self._op("+", o)

    def __radd__(self, o: Any) -> Sql:
        return self._op("+", o, swap=True)

    def __sub__(self, o: Any) -> Sql:
        return self._op("-", o)

    def __rsub__(self, o: Any) -> Sql:
        return self._op("-", o, swap=True)

    def __mul__(self, o: Any) -> Sql:
        return self._op("*", o)

    def __rmul__(self, o: Any) -> Sql:
        return self._op("*", o, swap=True)

    def __truediv__(self, o: Any) -> Sql:
        return self._op("/", o)

    def __rtruediv__(self, o: Any) -> Sql:
        return self._op("/", o, swap=True)

    def __pow__(self, o: Any) -> Sql:
        return Sql(f"pow({self.text}, {literal(o)})")

    def __rpow__(self, o: Any) -> Sql:
        return Sql(f"pow({literal(o)}, {self.text})")

    def __eq__(self, o: object) -> Sql:  # type: ignore[override]
        return self._op("=", o)

    def __le__(self, o: Any) -> Sql:
        return self._op("<=", o)

    def __or__(self, o: Any) -> Sql:
        return self._op("OR", o)

    def __abs__(self) -> Sql:
        return Sql(f"abs({self.text})")

    def sqrt(self) -> Sql:
        return Sql(f"sqrt({self.text})")

    def exp(self) -> Sql:
        return Sql(f"exp({self.text})")

    def __str__(self) -> str:
        return self.text


def when(cond: Any, then: Any, otherwise: Any) -> Any:
    """`then` where `cond` holds, else `otherwise`: CASE in SQL, `pl.when` on expressions."""
    if isinstance(cond, Sql):
        return Sql(f"CASE WHEN {cond} THEN {literal(then)} ELSE {literal(otherwise)} END")
    return pl.when(cond).then(then).otherwise(otherwise)
