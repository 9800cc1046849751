"""Config values: the error type, durations and sizes, the YAML file reader, and the per-field checkers.

A checker takes the raw YAML value and returns the typed value or raises ``TypeError``/``ValueError``
with the reason; each setting of ``agent.core.config_schema`` names one."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from typing import Any, Literal, TypeVar, Union

import yaml

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
# No space between number and unit: "64 MB" is refused rather than guessed at.
_SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)?$")
_SIZE_UNITS = {None: 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
               "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4}
# Bounds a scheduler and a timer accept: every duration is finite and at most a year, and an interval (how often
# something runs) is between a second and 30 days (the long check level runs weekly by default).
MAX_DURATION_S = 365 * 86400.0
MIN_INTERVAL_S = 1.0
MAX_INTERVAL_S = 30 * 86400.0
MAX_CONFIG_BYTES = 1 << 20  # a config or web config file larger than this is refused unread
MAX_YAML_NODES = 100_000  # nodes after alias expansion: a real config has a few hundred
MAX_SHOWN = 60  # characters of a value an error message repeats
_LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_RESERVED_LABELS = frozenset({"npu", "chip", "collector", "job", "instance"})


class ConfigError(Exception):
    """Every problem found in a configuration, each prefixed with its key path."""

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = problems
        self.source = source
        super().__init__(f"invalid {source}:\n" + "\n".join(f"  - {p}" for p in problems))


class DurationRangeError(ValueError):
    """A well-formed duration that is not finite or longer than ``MAX_DURATION_S``."""


def parse_duration(value: Any) -> float:
    """``10s``, ``5m``, ``1.5h``, ``250ms`` or a bare number of seconds -> seconds.

    ``ValueError`` for anything else; ``DurationRangeError`` for ``.inf``, ``.nan`` or more than a year."""
    if isinstance(value, bool):
        raise ValueError(value)
    seconds: float | None = None
    if isinstance(value, int):
        if value < 0:
            raise ValueError(value)
        if value > MAX_DURATION_S:  # before float(): a 400-digit integer does not fit one
            raise DurationRangeError(value)
        seconds = float(value)
    elif isinstance(value, float):
        if value < 0:
            raise ValueError(value)
        seconds = value
    elif isinstance(value, str):
        match = _DURATION_RE.match(value)
        if match:
            seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    if seconds is None:
        raise ValueError(value)
    if not math.isfinite(seconds) or seconds > MAX_DURATION_S:
        raise DurationRangeError(value)
    return seconds


def format_duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def parse_size(value: Any) -> int:
    """``64MiB``, ``1GiB``, ``4096`` -> bytes."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str):
        match = _SIZE_RE.match(value)
        if match:
            return int(float(match.group(1)) * _SIZE_UNITS[match.group(2)])
    raise ValueError(value)


# --- checkers: each returns the typed value of a setting or raises TypeError with the reason
T = TypeVar("T")
Checker = Callable[[Any], T]


def duration(value: Any) -> float:
    try:
        return parse_duration(value)
    except DurationRangeError:
        raise TypeError(f"expected a finite duration of at most {format_duration(MAX_DURATION_S)}, "
                        f"got {show(value)}") from None
    except ValueError:
        raise TypeError(f"expected a duration like 10s, got {show(value)}") from None


def positive_duration(value: Any) -> float:
    seconds = duration(value)
    if seconds <= 0:
        raise TypeError(f"expected a duration above zero like 10s, got {show(value)}")
    return seconds


def interval(value: Any) -> float:
    """How often a scheduled job runs: between ``MIN_INTERVAL_S`` and ``MAX_INTERVAL_S``."""
    seconds = duration(value)
    if not MIN_INTERVAL_S <= seconds <= MAX_INTERVAL_S:
        raise TypeError(f"expected an interval between {format_duration(MIN_INTERVAL_S)} and "
                        f"{format_duration(MAX_INTERVAL_S)}, got {show(value)}")
    return seconds


def size(value: Any) -> int:
    try:
        return parse_size(value)
    except ValueError:
        raise TypeError(f"expected a size like 64MiB (units B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; no space), "
                        f"got {show(value)}") from None


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise TypeError(f"expected true or false, got {show(value)}")


def integer(minimum: int, maximum: int | None = None) -> Checker[int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"expected an integer, got {show(value)}")
        if value < minimum or (maximum is not None and value > maximum):
            upper = f" and {maximum}" if maximum is not None else ""
            raise TypeError(f"expected an integer between {minimum}{upper}, got {value}")
        return value

    return check


def ratio(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise TypeError(f"expected a ratio between 0 and 1, got {show(value)}")
    return float(value)


def positive_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise TypeError(f"expected a positive number, got {show(value)}")
    return float(value)


def string(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise TypeError(f"expected a string, got {show(value)}")


_BRACKETED_RE = re.compile(r"^\[([^\[\]]+)\](?::([^:]*))?$")


def split_listen_address(text: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``:port``, ``[v6]``, ``[v6]:port`` or a bare IPv6 address -> (host, port).

    ``:port`` is every interface, as node_exporter reads it; a bare IPv6 address has no port."""
    text = text.strip()
    bracketed = _BRACKETED_RE.match(text)
    if bracketed:
        host, port_text = bracketed.group(1), bracketed.group(2)
    elif text.startswith("[") or "]" in text:
        raise ValueError(f"expected an address, host:port or [IPv6]:port, got {show(text)}")
    elif text.count(":") == 1:
        host, port_text = text.split(":")
        host = host or "0.0.0.0"  # noqa: S104 - ":9611" means every interface, as in node_exporter
    else:
        host, port_text = text, None
    if port_text is None:
        return host, None
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"the port in {show(text)} is not 1-65535")
    return host, int(port_text)


def listen_host(value: Any) -> str:
    """``web.listen_address``: an address only; its port is ``web.port``."""
    try:
        host, port = split_listen_address(string(value))
    except ValueError as exc:
        raise TypeError(str(exc)) from None
    if port is not None:
        raise TypeError(f"{show(value)} has a port: write the address here and {port} in web.port")
    return host


def optional(check: Checker[T]) -> Checker[T | None]:
    def optional(value: Any) -> T | None:
        return None if value is None else check(value)

    optional.__wrapped__ = check  # type: ignore[attr-defined]  # the reference writes its default as check's
    return optional


def choice(*options: str) -> Checker[str]:
    def check(value: Any) -> str:
        if value in options:
            return str(value)
        raise TypeError(f"expected one of {', '.join(options)}, got {show(value)}")

    return check


def str_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise TypeError(f"expected a list of strings, got {show(value)}")


def int_list(value: Any) -> tuple[int, ...]:
    if isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        return tuple(value)
    raise TypeError(f"expected a list of integers, got {show(value)}")


def labels_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a mapping of label names to values, got {show(value)}")
    result: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not _LABEL_NAME_RE.match(key) or key.startswith("__"):
            raise TypeError(f"invalid label name {show(key)}")
        if key in _RESERVED_LABELS:
            raise TypeError(f"label name {key!r} is used by npuwatch's own series")
        if not isinstance(item, (str, int, float)) or isinstance(item, bool):
            raise TypeError(f"label {key!r}: expected a string value, got {show(item)}")
        result[key] = str(item)
    return result


def peaks_table(value: Any) -> dict[str, dict[str, float]]:
    """``{model: {dtype: FLOP/s}}``, e.g. ``{"910B3": {"fp16": 313.7e12}}``."""
    if not isinstance(value, dict):
        raise TypeError(f"expected a mapping of model to {{dtype: flops}}, got {show(value)}")
    result: dict[str, dict[str, float]] = {}
    for model, per_dtype in value.items():
        if not isinstance(per_dtype, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in per_dtype.values()
        ):
            raise TypeError(f"{model}: expected {{dtype: positive FLOP/s}}, got {show(per_dtype)}")
        result[str(model)] = {str(k): float(v) for k, v in per_dtype.items()}
    return result


AutoOrBool = Union[bool, Literal["auto"]]


def auto_or_boolean(value: Any) -> AutoOrBool:
    if isinstance(value, bool):
        return value
    if value == "auto":
        return "auto"
    raise TypeError(f"expected true, false or auto, got {show(value)}")


def references_table(value: Any) -> dict[str, dict[str, float]]:
    """``{model: {measure: value}}`` in base units, e.g. ``{"910B3": {"hbm_bandwidth": 1.5e12}}``."""
    if not isinstance(value, dict):
        raise TypeError(f"expected a mapping of model to {{measure: value}}, got {show(value)}")
    result: dict[str, dict[str, float]] = {}
    for model, measures in value.items():
        if not isinstance(measures, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in measures.values()
        ):
            raise TypeError(f"{model}: expected {{measure: positive value}}, got {show(measures)}")
        result[str(model)] = {str(k): float(v) for k, v in measures.items()}
    return result


def cron_expression(value: Any) -> str:
    from agent.core.cron import CronError, parse_cron

    try:
        parse_cron(value)
    except CronError as exc:
        raise TypeError(f"{exc}, got {show(value)}") from None
    return str(value)


def clip(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` cut to ``limit`` characters (a trailing ... says it was cut)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def show(value: Any) -> str:
    """A value as an error message quotes it: short, one line, never the whole of a huge input."""
    text = f'"{value}"' if isinstance(value, str) else repr(value)
    return clip(text.replace("\n", "\\n"))


def read_yaml_file(path: str | os.PathLike[str]) -> Any:
    """Parse a YAML file; unreadable or malformed input raises ConfigError with the line.

    Only the parser's ``problem`` is quoted, never its context, which may hold a secret.
    """
    source = str(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError([f"cannot read: {exc.strerror or exc}"], source) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError([f"larger than {MAX_CONFIG_BYTES >> 20} MiB: not a config file"], source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([f"not UTF-8 text (byte {exc.start})"], source) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        expanded = _expanded_size(node)
        if expanded > MAX_YAML_NODES:
            raise ConfigError([f"expands to more than {MAX_YAML_NODES} YAML nodes through aliases: "
                               "not a config file"], source)
        duplicates = duplicate_keys(node)
        if duplicates:
            raise ConfigError(duplicates, source)
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError([f"not valid YAML{where}: {problem}, check the YAML syntax"], source) from None
    except RecursionError:
        raise ConfigError(["nested too deeply: not a config file"], source) from None


def duplicate_keys(root: yaml.Node | None) -> list[str]:
    """Each key written twice in one mapping, with both lines: YAML keeps the last one silently.

    A merge (``<<: *base``) is not a duplicate: overriding merged keys is what it is for."""
    problems: list[tuple[int, str]] = []
    seen_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, str]] = [(root, "")] if root is not None else []
    while stack:
        node, path = stack.pop()
        if id(node) in seen_nodes:  # an alias: its mapping was checked where it was defined
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(node.value))
        elif isinstance(node, yaml.MappingNode):
            first_line: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                    stack.append((value, path))
                    continue
                where = f"{path}.{key.value}" if path else str(key.value)
                line = key.start_mark.line + 1
                earlier = first_line.get((key.tag, key.value))
                if earlier is None:
                    first_line[(key.tag, key.value)] = line
                else:
                    problems.append((line, f"{clip(where)}: duplicate key at line {line} (first at line "
                                           f"{earlier}); YAML would keep only the last, so write it once"))
                stack.append((value, where))
    return [text for _, text in sorted(problems)]


def _expanded_size(root: yaml.Node | None) -> int:
    """How many nodes the document holds once every alias is expanded (memoised, so a bomb costs little)."""
    if root is None:
        return 0
    sizes: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [item for pair in node.value for item in pair]
        if children_done:
            sizes[key] = min(1 + sum(sizes.get(id(child), 1) for child in children), MAX_YAML_NODES + 1)
            visiting.discard(key)
            continue
        if key in visiting:  # an alias to a node that contains it: counted once, not followed
            continue
        visiting.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes and id(child) not in visiting)
    return sizes[id(root)]
