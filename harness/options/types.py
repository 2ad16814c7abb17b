"""The command line's argument types: a value that cannot be one is an argparse error naming
the flag (exit 2) before anything runs -- a typo like 1e9 cores is an error here, not an hour
later."""

from __future__ import annotations

import argparse

from harness.errors import UserError
from harness.host.resources import parse_gpu_list
from harness.terminal import visible

MAX_SECONDS = 7 * 24 * 3600.0


def whole(low: int, high: int):
    """A whole number from `low` to `high`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {visible(repr(text))}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {high}, got {value}")
        return value
    return parse


def seconds(text: str) -> float:
    """Seconds, finite, from 0 to a week."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {visible(repr(text))}") from None
    if not 0 <= value <= MAX_SECONDS:  # NaN fails every comparison
        raise argparse.ArgumentTypeError(f"expected seconds from 0 to {MAX_SECONDS:.0f}, got {text}")
    return value


def gpu_list(text: str) -> str:
    try:
        parse_gpu_list(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text
