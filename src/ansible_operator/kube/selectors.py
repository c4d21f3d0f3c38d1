"""Label and field selectors, as the API server reads them, for answering
LISTs from the cache exactly as the server would."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Predicate = Callable[[Mapping[str, Any]], bool]

_SET_TERM = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\((.*)\)\s*$")
_EQUALITY_TERM = re.compile(r"^\s*([^\s!=]+)\s*(==|=|!=)\s*([^\s]*)\s*$")
_EXISTS_TERM = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


class SelectorError(ValueError):
    """A selector we cannot evaluate; the caller asks the API server instead."""


def _terms(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    terms, depth, current = [], 0, ""
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [term for term in terms if term.strip()]


def _label_term(term: str) -> Callable[[Mapping[str, str]], bool]:
    if match := _SET_TERM.match(term):
        key, operator, raw_values = match.groups()
        values = {value.strip() for value in raw_values.split(",") if value.strip()}
        if operator == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if match := _EQUALITY_TERM.match(term):
        key, operator, value = match.groups()
        if operator == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: key in labels and labels[key] == value
    if match := _EXISTS_TERM.match(term):
        negated, key = match.groups()
        if negated:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise SelectorError(f"cannot parse label selector term {term.strip()!r}")


# Kubernetes' label syntax: a key is [prefix/]name, a value at most 63 characters.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_NAME})?$")


def check_label_selector(selector: str) -> None:
    """Raise SelectorError, naming the term, for a selector the API server would
    refuse: one we cannot parse, or a key or value that is no label's."""
    if not selector.strip():
        raise SelectorError("empty label selector")
    for term in _terms(selector):
        _label_term(term)
        if match := _SET_TERM.match(term):
            key, values = match.group(1), [v.strip() for v in match.group(3).split(",")]
        elif match := _EQUALITY_TERM.match(term):
            key, values = match.group(1), [match.group(3)]
        else:
            key, values = term.strip().lstrip("!").strip(), []
        if not _LABEL_KEY.match(key):
            raise SelectorError(f"{key!r} in {term.strip()!r} is not a label key")
        for value in values:
            if not _LABEL_VALUE.match(value):
                raise SelectorError(f"{value!r} in {term.strip()!r} is not a label value")


def label_predicate(selector: str | None) -> Callable[[Mapping[str, str]], bool]:
    if not selector or not selector.strip():
        return lambda _labels: True
    checks = [_label_term(term) for term in _terms(selector)]
    return lambda labels: all(check(labels) for check in checks)


_FIELDS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "metadata.name": lambda obj: (obj.get("metadata") or {}).get("name") or "",
    "metadata.namespace": lambda obj: (obj.get("metadata") or {}).get("namespace") or "",
}


def field_predicate(selector: str | None) -> Predicate:
    """Only the fields every kind supports; others raise SelectorError."""
    if not selector or not selector.strip():
        return lambda _obj: True
    checks: list[Predicate] = []
    for term in _terms(selector):
        match = _EQUALITY_TERM.match(term)
        if match is None or match.group(1) not in _FIELDS:
            raise SelectorError(f"field selector {term.strip()!r} is answered by the server")
        field, operator, value = match.groups()
        read = _FIELDS[field]
        if operator == "!=":
            checks.append(lambda obj, read=read, value=value: read(obj) != value)
        else:
            checks.append(lambda obj, read=read, value=value: read(obj) == value)
    return lambda obj: all(check(obj) for check in checks)
