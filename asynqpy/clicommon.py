"""What every `asynqpy` command shares: the common options (before or after the subcommand) and how a command
ends on an error (one line for ours, a traceback for a bug or for the user's own code; --debug shows all)."""

from __future__ import annotations

import argparse
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import NoReturn

from asynqpy.devstate import choose_redis_url
from asynqpy.errors import AsynqError, InvalidArgumentError, RedisUnavailableError, UsageError, mask_url
from asynqpy.terminal import say

DEBUG_ENV = "ASYNQPY_DEBUG"
# An error line echoes what it was given: a word (a task id, a queue name, a value) longer than LONG_WORD
# characters is shown as its first ECHO characters and "...", the whole line at most MAX_LINE characters.
LONG_WORD, ECHO, MAX_LINE = 200, 80, 1000
_LONG = re.compile(rf"\S{{{LONG_WORD + 1},}}")


def shorten(message: str) -> str:
    """message with every overlong word cut (see LONG_WORD), and cut itself past MAX_LINE characters."""
    message = _LONG.sub(lambda m: m.group()[:ECHO] + "...", message)
    return message if len(message) <= MAX_LINE else message[:MAX_LINE] + "..."


class Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors echo values shortened (shorten); its subcommands' parsers are of
    this class too (add_subparsers makes them of the parent's type)."""

    def error(self, message: str) -> NoReturn:
        super().error(shorten(message))


def add_common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """--redis-url, --json and --debug. On the top-level parser they have defaults; on a subcommand they are
    SUPPRESSed unless given, so `asynqpy --json stats` and `asynqpy stats --json` both work."""
    have = parser._option_string_actions  # an option a command defines itself is kept, with its help
    kw: dict[str, object] = {} if top else {"default": argparse.SUPPRESS}
    if not top:
        for opt in ("--redis-url", "--json", "--debug"):
            if opt in have and have[opt].default in (None, False):
                have[opt].default = argparse.SUPPRESS  # so `asynqpy --json CMD` is not undone by CMD's default
    if "--redis-url" not in have:
        parser.add_argument("--redis-url", metavar="URL", **kw,  # type: ignore[arg-type]
                            help="the Redis to use (default: $ASYNQPY_REDIS_URL, $REDIS_URL, the server of "
                                 "`asynqpy dev`/`asynqpy redis` found from this directory upwards, "
                                 "then redis://127.0.0.1:6379/0)")
    if "--json" not in have:
        parser.add_argument("--json", action="store_true", **kw,  # type: ignore[arg-type]
                            help="print JSON, for scripts")
    if "--debug" not in have:
        parser.add_argument("--debug", action="store_true", **kw,  # type: ignore[arg-type]
                            help=f"debug logging, and a traceback with every error (or set {DEBUG_ENV}=1)")


def subparsers_of(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every parser below this one, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                yield sub
                yield from subparsers_of(sub)


def add_common_everywhere(parser: argparse.ArgumentParser) -> None:
    add_common(parser, top=True)
    for sub in subparsers_of(parser):
        add_common(sub, top=False)


def command_parser(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the deepest (sub)command named in argv: `task ls ...` gives `asynqpy task ls`'s."""
    for word in argv:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs and word in subs[0].choices:
            parser = subs[0].choices[word]
    return parser


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """argv parsed, with the words of a command's last, repeatable positional (task ids, queues, PATTERN=ROLE)
    allowed after its options too: argparse takes positionals once, so in `task archive default --yes id1 id2`
    the ids would be left over. Anything else left over is the command's usage error (exit 2)."""
    args, unknown = parser.parse_known_args(argv)
    if not unknown:
        return args
    leaf = command_parser(parser, argv)
    positionals = leaf._get_positional_actions()
    last = positionals[-1] if positionals else None
    if (last is not None and last.nargs in ("*", "+") and last.type is None and last.choices is None
            and not any(w.startswith("-") for w in unknown)):
        setattr(args, last.dest, [*(getattr(args, last.dest, None) or []), *unknown])
        return args
    # argparse would show the top-level usage; the usage of the command given helps more
    leaf.error(f"unrecognized arguments: {' '.join(unknown)}")


def debugging(args: argparse.Namespace | None = None) -> bool:
    return bool(getattr(args, "debug", False)) or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def where_redis(args: argparse.Namespace) -> str:
    """How the Redis URL of this command was chosen (for a failed connection's message)."""
    if getattr(args, "redis_url", None):
        return "given with --redis-url"
    return choose_redis_url().source


def run_guarded(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    """Run a command's func and turn what it raises into an exit code and a message on stderr.

    UsageError and InvalidArgumentError (a value the command was given is wrong: a malformed query, an option
    the library refuses): one line, exit 2. Our other errors (AsynqError) and Redis being unreachable: one line, exit 1.
    Anything else is a bug (ours, or in the user's handler module): its traceback, exit 1. --debug (or
    ASYNQPY_DEBUG=1) prints the traceback of every error.
    """
    try:
        return int(func(args) or 0)
    except BrokenPipeError:  # e.g. `asynqpy stats | head`: the reader left, which is not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        return report(exc, args)


def report(exc: Exception, args: argparse.Namespace) -> int:
    """Print exc as the CLI does (see run_guarded) and return the exit code."""
    debug = debugging(args)
    # redis-py's own error, let through by a command, becomes ours with the URL masked. redis-py is imported
    # only by commands that talk to Redis (start-up): if it is not loaded, exc is none of its errors.
    if "redis" in sys.modules:
        from asynqpy.rdb.failures import REDIS_PY_ERRORS, translate

        if isinstance(exc, REDIS_PY_ERRORS):
            url = getattr(args, "redis_url", None) or choose_redis_url().url
            ours = translate(exc, url)
            ours.__cause__ = exc  # --debug shows redis-py's traceback too
            exc = ours
    if isinstance(exc, RedisUnavailableError):
        if debug:
            traceback.print_exception(exc)
        say(f"asynqpy: {shorten(_unavailable(exc, args))}", file=sys.stderr)
        return 1
    if isinstance(exc, AsynqError):
        if debug:
            traceback.print_exception(exc)
        say(f"asynqpy: {shorten(str(exc))}", file=sys.stderr)
        return 2 if isinstance(exc, (UsageError, InvalidArgumentError)) else 1
    traceback.print_exception(exc)
    say(f"asynqpy: the command failed with the error above ({type(exc).__name__})", file=sys.stderr)
    return 1


def _unavailable(exc: RedisUnavailableError, args: argparse.Namespace) -> str:
    return f"{exc} (the URL was {where_redis(args)})"


# The one URL masker (passwords before "@" and every *password= query option, e.g. a Sentinel URL's).
mask = mask_url
