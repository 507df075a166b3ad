"""SQLite rows to values: each value built from the row's columns of its fields' names (the
schema's names are the rows'), the few that need it converted (microseconds to `datetime`, JSON
text, integers to `bool` or `Mode`)."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from durable_graph.core.model import Event, Mode
from durable_graph.core.validation import decode_json, from_micros
from durable_graph.embedded.rows import CheckpointRow, EffectRow, EntryRow, ThreadRow

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def ts(value: int | None) -> datetime | None:
    """A nullable timestamp column (microseconds since the epoch)."""
    return None if value is None else from_micros(value)


def at(value: int) -> datetime:
    """A timestamp column (microseconds since the epoch)."""
    return from_micros(value)


def row_of(cls: type[T], row: sqlite3.Row, **convert: Callable[[Any], Any]) -> T:
    """A ``cls`` from the row's columns of the same names as its fields (the schema's names are
    the rows'), each named in ``convert`` passed through its function (e.g. microseconds to
    `datetime`)."""
    names = (f.name for f in dataclasses.fields(cls))
    return cls(**{name: convert.get(name, same)(row[name]) for name in names})


def same(value: Any) -> Any:
    return value


def thread_of(row: sqlite3.Row) -> ThreadRow:
    return row_of(ThreadRow, row, created_at=at, updated_at=at)


def checkpoint_of(row: sqlite3.Row) -> CheckpointRow:
    return row_of(CheckpointRow, row, next=json_tuple, created_at=at, committed_at=at)


def json_tuple(value: str) -> tuple[str, ...]:
    return tuple(decode_json(value))


def event_of(row: sqlite3.Row) -> Event:
    return row_of(Event, row, payload=decode_json, created_at=at, committed_at=at)


def effect_of(row: sqlite3.Row) -> EffectRow:
    return row_of(EffectRow, row, recorded_at=at)


def entry_of(row: sqlite3.Row) -> EntryRow:
    return row_of(
        EntryRow,
        row,
        mode=Mode,
        admitted=bool,
        thread_deleted=bool,
        submitted_at=at,
        lease_expires_at=ts,
        lease_ttl=lambda us: None if us is None else timedelta(microseconds=us),
        closed_at=ts,
        not_before=ts,
    )


__all__ = ["at", "checkpoint_of", "effect_of", "entry_of", "event_of", "row_of", "thread_of", "ts"]
