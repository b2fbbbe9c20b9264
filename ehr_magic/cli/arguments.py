"""Argument types the subcommands share: argparse refuses a bad value before anything is opened."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ehr_magic.agent import checked_setting
from ehr_magic.errors import ConfigError


def _number(text: str, kind: type[int] | type[float]) -> int | float:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' if kind is int else ''}number") from None


def positive_int(text: str) -> int:
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def non_negative_number(text: str) -> float:
    value = float(_number(text, float))
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def agent_setting(name: str) -> Callable[[str], int | float]:
    """The argument type of the agent setting ``name`` (``SETTING_RANGES``): its number, checked as
    the agent checks it, so that the command line, the magic and the panel accept the same values."""
    def parse(text: str) -> int | float:
        value = _number(text, float if name == "timeout" else int)
        try:
            return checked_setting(name, value)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = name  # argparse names the type in its messages
    return parse
