"""Typed environment helpers that fail loudly on malformed values."""

import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def envstr(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def envbool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def envint(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None


def envfloat(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None


def envlist(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def envpairs(name: str, default: str = "") -> list[tuple[str, str]]:
    """`a=x,b=y` as [("a", "x"), ("b", "y")]; a key may repeat; an entry without `=` fails."""
    pairs = []
    for item in envlist(name, default):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ImproperlyConfigured(f"{name} entries must look like key=value, got {item!r}")
        pairs.append((key.strip(), value.strip()))
    return pairs
