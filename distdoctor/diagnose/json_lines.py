"""Log lines kept as one JSON object each (Docker's json-file driver, fluentd / cloud collectors, a JSON logging
formatter): the text they carry, line by line, with the rank and time the object states.

Only structure lives here (which fields hold what); no cause knowledge.
"""

from __future__ import annotations

import json

from distdoctor.diagnose.prefixes import parse_timestamp, peel_prefix

# fields that hold the logged text, in the order it was written (the message, then the traceback logged with it)
TEXT_FIELDS = ("log", "msg", "message", "exc_info", "exc_text", "exception", "stack_trace", "traceback")
RANK_FIELDS = ("rank", "global_rank")
TIME_FIELDS = ("time", "timestamp", "@timestamp", "asctime", "ts")
MAX_CHARS = 1 << 20


def lines_of(text: str) -> list[tuple[str, int | None, tuple | None]]:
    """The lines to read for one log line: those a JSON object carries, each behind what a collector put in front
    of the object (kubectl's pod, a timestamp: read again with each line), else the line itself."""
    s = text.rstrip()
    if not s.endswith("}") or "{" not in s:
        return [(text, None, None)]
    body = s if s.lstrip().startswith("{") else peel_prefix(s)[3]
    inner = unwrap(body)
    if inner is None:
        return [(text, None, None)]
    outer = s[:len(s) - len(body)]
    return [(outer + ln, rank, ts) for ln, rank, ts in inner]


def unwrap(text: str) -> list[tuple[str, int | None, tuple | None]] | None:
    """The lines a JSON-object log line carries, each with the object's rank and time (None where it states
    none); None when `text` is no JSON object or holds no text field (it is then read as it is)."""
    s = text.strip()
    if not (s.startswith("{") and s.endswith("}")) or len(s) > MAX_CHARS or '"' not in s:
        return None
    try:
        obj = json.loads(s)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    parts = [obj[k] for k in TEXT_FIELDS if isinstance(obj.get(k), str) and obj[k].strip()]
    if not parts:
        return None
    rank = next((_int(obj[k]) for k in RANK_FIELDS if k in obj and _int(obj[k]) is not None), None)
    ts = next((parse_timestamp(obj[k]) for k in TIME_FIELDS if isinstance(obj.get(k), str)), None)
    lines = [ln.rstrip("\r") for part in parts for ln in part.rstrip("\n").split("\n")]
    return [(ln, rank, ts) for ln in lines]


def _int(value) -> int | None:
    """A rank field's value as an int (a number or a numeric string), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and 0 <= value < 1 << 24:
        return value
    if isinstance(value, str) and value.isdigit() and len(value) < 8:
        return int(value)
    return None
