"""Options shared across subcommands, and which command a command line runs (before parsing it whole)."""

from __future__ import annotations

import argparse
from collections.abc import Collection, Sequence

__all__ = ["command_named", "options_everywhere", "verbose_everywhere"]


def command_named(argv: Sequence[str], commands: Collection[str]) -> str | None:
    """The command ``argv`` runs: its first word that is not an option (the options before a command take
    no value), when it names one; None otherwise (help, a typo: the whole parser answers)."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word in commands else None


def options_everywhere(parser: argparse.ArgumentParser, dests: Sequence[str]) -> None:
    """The options ``dests`` of ``parser`` accepted after its action too (``faults show --demo-dir D``).

    The copies default to SUPPRESS, so a value given before the action is kept when none follows it."""
    shared = [action for action in parser._actions if action.dest in dests and action.option_strings]
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for child in action.choices.values():
            for option in shared:
                if any(name in child._option_string_actions for name in option.option_strings):
                    continue
                child.add_argument(*option.option_strings, dest=option.dest, type=option.type,
                                   metavar=option.metavar, help=option.help, default=argparse.SUPPRESS)


def verbose_everywhere(parser: argparse.ArgumentParser) -> None:
    """``-v`` after the command too (``npuwatch once -v``), not only before it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                if "-v" not in child._option_string_actions:
                    child.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                                       help="debug logging")
                verbose_everywhere(child)
