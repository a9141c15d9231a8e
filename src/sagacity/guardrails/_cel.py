"""Conditions in CEL, the Common Expression Language, through Google's CEL runtime for Python.

Why CEL and this binding (measured on this project's machine, docs/policies.md): a compiled
``cel-expr-python`` expression evaluates in ~4 µs, is type-checked when the policy loads (an
undeclared name or a non-boolean condition is a line-numbered error, not a surprise at run time),
and reports evaluation errors as values, which we turn into a fail-closed verdict. Cedar
(``cedarpy``) took ~1.3 ms per decision, the pure-Python ``cel-python`` ~260 µs, and the Rust
``common-expression-language`` 10-80 µs: each more than the 5 % a call may spend on its policy.

The runtime is the ``policy`` extra; a policy with conditions names it when it is missing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

from sagacity.errors import ConfigurationError

__all__ = ["CALL_VARIABLES", "RESULT_VARIABLES", "Bundle", "Condition", "ConditionError", "compile_condition"]

#: What a call's condition may name.
CALL_VARIABLES = ("tool", "args", "principal", "agent", "saga")
#: What a ``requires.result`` condition may name: the earlier call's result and arguments.
RESULT_VARIABLES = ("result", "args")


class ConditionError(Exception):
    """A condition does not compile, or failed while evaluating (the text says why)."""


def _runtime() -> Any:
    try:
        from cel_expr_python import cel  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - the extra is part of dev
        raise ConfigurationError(
            "policy conditions (when = ..., requires.result = ...) need the CEL runtime: "
            "pip install 'sagacity[policy]'"
        ) from exc
    return cel


_ENVS: dict[tuple[str, ...], Any] = {}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env(variables: tuple[str, ...]) -> Any:
    env = _ENVS.get(variables)
    if env is None:
        cel = _runtime()
        types = {
            "tool": cel.Type.STRING,
            "principal": cel.Type.STRING,
            "agent": cel.Type.STRING,
            "saga": cel.Type.STRING,
            "args": cel.Type.Map(cel.Type.STRING, cel.Type.DYN),
            "result": cel.Type.DYN,
        }
        env = _ENVS[variables] = cel.NewEnv(variables={name: types[name] for name in variables})
    return env


@functools.lru_cache(maxsize=1024)
def compiled(text: str, variables: tuple[str, ...] = CALL_VARIABLES) -> Any:
    """``text`` compiled over ``variables``, once per text: a policy file read again (a touched
    file, a second ``Sagacity``, the gateway's reload) reuses its programs, which cost ~100 times
    an evaluation to compile. A compiled program holds no state between evaluations."""
    return _env(variables).compile(text)


class Condition:
    """One compiled CEL expression that must come out ``true`` or ``false``.

    ``names`` are the variables its text mentions: only those are handed to the runtime, which
    converts every value it is given (a call's arguments cost the most) on each evaluation.
    """

    __slots__ = ("_error", "_expression", "names", "text")

    def __init__(self, text: str, expression: Any, error: Any, names: tuple[str, ...]) -> None:
        self.text = text
        self._expression = expression
        self._error = error
        self.names = names

    def holds(self, data: Mapping[str, Any]) -> bool:
        """Evaluate on ``data`` (at least ``names``); ``ConditionError`` if it errs or is not a bool
        (fail closed)."""
        try:
            value = self._expression.eval(data=data)
        except Exception as exc:
            raise ConditionError(f"{self.text!r} failed: {exc}") from exc
        result = value.value()
        if value.type() == self._error:
            raise ConditionError(f"{self.text!r} failed: {result}")
        if type(result) is not bool:
            raise ConditionError(f"{self.text!r} gave {result!r}, not true or false")
        return result

    def __repr__(self) -> str:
        return f"Condition({self.text!r})"


def compile_condition(text: str, variables: tuple[str, ...] = CALL_VARIABLES) -> Condition:
    """Compile and type-check ``text``; ``ConditionError`` with CEL's message if it is not a
    boolean expression over ``variables``."""
    cel = _runtime()
    try:
        expression = compiled(text, variables)
    except Exception as exc:
        raise ConditionError(" ".join(str(exc).split())) from exc
    returns = expression.return_type()
    if returns not in (cel.Type.BOOL, cel.Type.DYN):
        raise ConditionError(f"{text!r} is {returns.name()}, not a condition (true or false)")
    mentioned = set(_IDENTIFIER.findall(text))
    return Condition(text, expression, cel.Type.ERROR, tuple(n for n in variables if n in mentioned))


class Bundle:
    """Every ``when`` condition that may apply to one tool's calls, evaluated in one go.

    The runtime's cost is mostly per evaluation (converting the variables, running the program),
    not per condition, so the conditions are compiled into one CEL list and evaluated once per
    call. A condition is a pure function of the variables it names, so the list's value is kept
    for the last few thousand distinct values of the variables it names (the arguments by their
    JSON text):
    a repeated identical call does not evaluate again. If the list errs, each condition is
    evaluated alone, so that only the one that errs fails closed.
    """

    __slots__ = ("_error", "_expression", "_memo", "conditions", "names")

    _MEMO_SIZE = 4096

    def __init__(self, conditions: tuple[Condition, ...]) -> None:
        cel = _runtime()
        self.conditions = conditions
        mentioned = {name for c in conditions for name in c.names}
        self.names = tuple(n for n in CALL_VARIABLES if n in mentioned)
        text = "[" + ", ".join(f"({c.text})" for c in conditions) + "]"
        self._expression = compiled(text)
        self._error = cel.Type.ERROR
        self._memo: dict[tuple[str, ...], tuple[bool | ConditionError, ...]] = {}

    def evaluate(
        self,
        key: Callable[[tuple[str, ...]], tuple[str, ...]],
        data: Callable[[tuple[str, ...]], Mapping[str, Any]],
    ) -> tuple[bool | ConditionError, ...]:
        """Each condition's value (or the ``ConditionError`` it raised), in order; ``key(names)``
        is what the named variables hold (the memo's key), ``data(names)`` the variables."""
        memo_key = key(self.names)
        found = self._memo.get(memo_key)
        if found is not None:
            return found
        variables = data(self.names)
        try:
            value = self._expression.eval(data=variables)
            results: Any = None if value.type() == self._error else value.plain_value()
        except Exception:  # noqa: BLE001 - evaluated one by one below, failing closed where due
            results = None
        if not isinstance(results, list) or not all(type(r) is bool for r in results):
            results = [self._one(c, data) for c in self.conditions]
        answer = tuple(results)
        if len(self._memo) >= self._MEMO_SIZE:
            self._memo.clear()
        self._memo[memo_key] = answer
        return answer

    @staticmethod
    def _one(
        condition: Condition, data: Callable[[tuple[str, ...]], Mapping[str, Any]]
    ) -> bool | ConditionError:
        try:
            return condition.holds(data(condition.names))
        except ConditionError as exc:
            return exc
