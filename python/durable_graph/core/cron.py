"""Cron expressions (SPEC §15): the grammar every backend accepts, and a schedule's slots.

**Grammar** (`cron_error`; ``sql/72_scheduling.sql``'s ``_dg_cron`` is the same check, so the SQL
API refuses exactly what Python refuses, issue 37 item 6): five fields (minute hour
day-of-month month day-of-week), or six with seconds first, separated by spaces or tabs. A field
is a comma-separated list of terms; a term is ``*``, a value, a range ``a-b`` (a ≤ b), any of
those followed by ``/step``, and in day-of-month also ``L`` (the month's last day) or ``LW`` (its
last weekday), in day-of-week also ``dL`` (the month's last weekday d) or ``d#n`` (its n-th, n in
1..5). Values: seconds and minutes 0-59, hours 0-23, days 1-31, months 1-12 or JAN-DEC,
weekdays 0-7 (0 and 7 are Sunday) or SUN-SAT; names in any ASCII case. Values, steps and ``n``
are one or two digits; a step is 1 up to the field's largest value. Day-of-month and
day-of-week both restricted (neither starting with ``*``) means either matches (Debian cron);
otherwise both must, and then the smallest listed day must exist in one of the listed months.
Everything this accepts `cronsim` accepts too (tests/test_scheduling.py checks).

**Slots** (`slots_after`, `latest_slot`; issue 37 item 7): a schedule's slots are the UTC
instants, whole seconds, whose wall-clock time in the schedule's zone matches the expression.
So across daylight-saving changes: a wall time that occurs twice (clocks set back) is two
instants and fires at each; a wall time the clocks skip (set forward) never occurs that day and
does not fire. (This is what cron libraries do for expressions with a ``*`` hour or minute;
Debian cron's special case — a fixed time fires once in the repeated hour and at the end of a
skipped one — is not followed: "the latest missed slot" and "each missed slot" then mean one
thing in UTC on every backend. A schedule that must run once a day at a fixed time whatever the
clocks do uses a time outside the changes, e.g. 01:00-04:00 avoided in Europe, or ``UTC``.)
The arithmetic never walks wall-clock time: it splits UTC time into spans of one UTC offset and
evaluates the expression on each span's own wall clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Final
from zoneinfo import ZoneInfo

from durable_graph.core.errors import ValidationError

_MONTHS: Final = (
    "JAN",
    "FEB",
    "MAR",
    "APR",
    "MAY",
    "JUN",
    "JUL",
    "AUG",
    "SEP",
    "OCT",
    "NOV",
    "DEC",
)
_DAYS: Final = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_DAYS_IN_MONTH: Final = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# (name, lowest, highest, names) of the six fields, seconds first.
_FIELDS: Final = (
    ("second", 0, 59, ()),
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DAYS),
)
_SEPARATOR: Final = re.compile(r"[ \t]+")
_ALLOWED: Final = re.compile(r"[0-9A-Za-z*,/#\- \t]+")
_LAST: Final = -1


class _Bad(Exception):
    pass


def _value(text: str, field: int) -> int:
    _, low, high, names = _FIELDS[field]
    upper = text.upper()
    if upper in names:
        return names.index(upper) + (1 if field == 4 else 0)
    if not re.fullmatch(r"[0-9]{1,2}", text):
        raise _Bad
    value = int(text)
    if not low <= value <= high:
        raise _Bad
    return value


def _term(text: str, field: int) -> set[int]:
    """The values one term of a field names (`_LAST` for L, LW, dL and d#n: not a plain day)."""
    _, low, high, _ = _FIELDS[field]
    upper = text.upper()
    if field == 3 and upper in ("L", "LW"):
        return {_LAST}
    if field == 5 and re.fullmatch(r"[0-7]L", upper):
        return {_LAST}
    if field == 5 and "#" in text:
        day, nth = text.split("#", 1)
        _value(day, 5)
        if not re.fullmatch(r"[1-5]", nth.lstrip("0") or "x") or len(nth) > 2:
            raise _Bad
        return {_LAST}
    base, step_text = text.split("/", 1) if "/" in text else (text, None)
    if base == "*":
        values = list(range(low, high + 1))
    elif "-" in base:
        start_text, end_text = base.split("-", 1)
        start, end = _value(start_text, field), _value(end_text, field)
        if end < start:
            raise _Bad
        values = list(range(start, end + 1))
    else:
        start = _value(base, field)
        values = [start] if step_text is None else list(range(start, high + 1))
    if step_text is None:
        return set(values)
    if not re.fullmatch(r"[0-9]{1,2}", step_text) or not 1 <= int(step_text) <= high:
        raise _Bad
    return set(values[:: int(step_text)])


def cron_error(expr: str) -> str | None:
    """Why ``expr`` is not a cron expression of the module's grammar, or None when it is."""
    if not _ALLOWED.fullmatch(expr):
        return "it may hold only digits, letters, spaces, tabs and * , / # -"
    parts = _SEPARATOR.split(expr.strip(" \t"))
    if len(parts) not in (5, 6):
        return "it must have five fields, or six with seconds first"
    if len(parts) == 5:
        parts.insert(0, "0")
    named: list[set[int]] = []
    for field, part in enumerate(parts):
        try:
            named.append(set().union(*(_term(t, field) for t in part.split(","))))
        except _Bad:
            return f"bad {_FIELDS[field][0]} field {part!r}"
    # Both day fields must match (either starts with *): the smallest listed day must exist in a
    # listed month.
    both = parts[3].startswith("*") or parts[5].startswith("*")
    if both and min(named[3]) > max(_DAYS_IN_MONTH[m - 1] for m in named[4]):
        return f"no listed month has day {min(named[3])}"
    return None


# --- slots ---------------------------------------------------------------------------------

_SPAN_PROBE: Final = timedelta(hours=6)
"""Offset changes are found by probing every 6 hours between a candidate slot and the search's
start, then bisecting to the second: no zone changes its offset twice within 6 hours."""


def _cronsim() -> ModuleType:
    try:
        import cronsim
    except ImportError:  # pragma: no cover - the extra is missing
        raise ValidationError(
            "cron schedules need the cronsim package: pip install 'durable-graph[cron]'"
        ) from None
    return cronsim


def _offset(zone: ZoneInfo, at: datetime) -> timedelta:
    offset = at.astimezone(zone).utcoffset()
    assert offset is not None
    return offset


def _change_between(zone: ZoneInfo, low: datetime, high: datetime) -> datetime:
    """The first instant after ``low`` with ``high``'s offset (they differ), to the second."""
    before = _offset(zone, low)
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        middle = middle.replace(microsecond=0)
        if middle <= low:
            middle = low + timedelta(seconds=1)
        if _offset(zone, middle) == before:
            low = middle
        else:
            high = middle
    return high


def _first_change(zone: ZoneInfo, low: datetime, high: datetime) -> datetime | None:
    """The first instant in (low, high] whose offset is not ``low``'s, or None."""
    offset = _offset(zone, low)
    probe = low
    while probe < high:
        nxt = min(probe + _SPAN_PROBE, high)
        if _offset(zone, nxt) != offset:
            return _change_between(zone, probe, nxt)
        probe = nxt
    return None


def _span_start(zone: ZoneInfo, low: datetime, high: datetime) -> datetime | None:
    """The first instant of ``high``'s span of one offset when it is in (low, high], or None."""
    offset = _offset(zone, high)
    probe = high
    while probe > low:
        prev = max(probe - _SPAN_PROBE, low)
        if _offset(zone, prev) != offset:
            return _change_between(zone, prev, probe)
        probe = prev
    return None


def _wall(at: datetime, offset: timedelta) -> datetime:
    return (at + offset).replace(tzinfo=None)


def _instant(wall: datetime, offset: timedelta) -> datetime:
    return (wall - offset).replace(tzinfo=UTC)


def slots_after(cron: str, timezone: str, after: datetime) -> Iterator[datetime]:
    """The slots after ``after`` (exclusive), in order, as UTC datetimes. Each candidate is the
    expression's next match on the wall clock of the offset in force at the search's start; it
    is a slot when no offset change lies between the two, else the search goes on from the
    change with the new offset."""
    zone = ZoneInfo(timezone)
    low = after.astimezone(UTC).replace(microsecond=0)
    inclusive = False
    while True:
        offset = _offset(zone, low)
        begin = _wall(low, offset) - (timedelta(seconds=1) if inclusive else timedelta(0))
        wall = next(iter(_cronsim().CronSim(cron, begin)), None)
        if wall is None:
            return
        slot = _instant(wall, offset)
        change = _first_change(zone, low, slot)
        if change is None:
            if slot > after:
                yield slot
            low, inclusive = slot, False
        else:
            low, inclusive = change, True


def latest_slot(
    cron: str, timezone: str, at_or_before: datetime, after: datetime
) -> datetime | None:
    """The newest slot at or before ``at_or_before`` and after ``after``, or None (the mirror of
    `slots_after`, searching backwards)."""
    zone = ZoneInfo(timezone)
    high = at_or_before.astimezone(UTC).replace(microsecond=0)
    while high > after:
        offset = _offset(zone, high)
        begin = _wall(high, offset) + timedelta(seconds=1)
        wall = next(iter(_cronsim().CronSim(cron, begin, reverse=True)), None)
        if wall is None:
            return None
        slot = _instant(wall, offset)
        start = _span_start(zone, max(slot, after), high)
        if start is None:
            return slot if slot > after else None
        high = start - timedelta(seconds=1)
    return None


__all__ = ["cron_error", "latest_slot", "slots_after"]
