"""What a failed run records and what a client is shown of it (SPEC §19.4): the worker's
``error_text`` keeps the traceback with the exception's notes moved under its first line, so the
last block is exactly ``Type: message``; ``client_error`` reads that block back, every line of the
message, unwrapping the worker's ``FinalFailure``, and never shows a frame or a path."""

from __future__ import annotations

import pytest

from durable_graph.core.validation import fit_error_text
from durable_graph.service.records import client_error
from durable_graph.worker.flow import FinalFailure, error_text


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_notes_go_under_the_first_line_and_the_message_stays_whole() -> None:
    exc = ValueError("weather backend has no station for 'Atlantis'\nsecond line")
    exc.add_note("During task with name 'tools' and id 'x'")
    text = error_text(_raised(exc))
    lines = text.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[1] == "  Note: During task with name 'tools' and id 'x'"
    assert lines[-2:] == [
        "ValueError: weather backend has no station for 'Atlantis'",
        "second line",
    ]
    assert client_error(text) == {
        "error": "ValueError",
        "message": "weather backend has no station for 'Atlantis'\nsecond line",
    }


def test_a_final_failure_shows_the_error_it_wraps() -> None:
    def fail() -> None:
        try:
            raise RuntimeError("Recursion limit of 3 reached.\nFor troubleshooting, visit: x")
        except RuntimeError as exc:
            raise FinalFailure(f"GraphRecursionError: {exc}") from exc

    try:
        fail()
    except FinalFailure as exc:
        text = error_text(exc)
    assert "The above exception was the direct cause" in text
    assert client_error(text) == {
        "error": "GraphRecursionError",
        "message": "Recursion limit of 3 reached.\nFor troubleshooting, visit: x",
    }


@pytest.mark.parametrize(
    ("recorded", "shown"),
    [
        ("ValueError: plain", {"error": "ValueError", "message": "plain"}),
        ("FinalFailure: KeyError: 'x'", {"error": "KeyError", "message": "'x'"}),
        ("FinalFailure: no type here", {"error": "Error", "message": "no type here"}),
        ("something broke", {"error": "Error", "message": "something broke"}),
        ("lowercase: not a type", {"error": "Error", "message": "lowercase: not a type"}),
    ],
)
def test_a_recorded_line_without_a_traceback(recorded: str, shown: dict[str, str]) -> None:
    assert client_error(recorded) == shown


def test_a_fitted_traceback_still_shows_only_its_last_block() -> None:
    text = error_text(_raised(KeyError("missing")))
    fitted = fit_error_text(
        "Traceback (most recent call last):\n" + '  File "/x.py"\n' * 200 + text.splitlines()[-1],
        400,
    )
    assert fitted.startswith("…")
    assert client_error(fitted) == {"error": "KeyError", "message": "'missing'"}


def test_a_message_with_indented_lines_is_shown_whole_and_no_frame_with_it() -> None:
    """The leak of issue 48: a message whose lines are indented (a pretty-printed value, a
    validation error's fields) made the last indented line fall inside the message, and the
    client was shown the whole traceback with its file paths."""
    exc = ValueError("Expected dict, got 'yes'\n  field: input\n    detail: not a mapping")
    text = error_text(_raised(exc))
    assert client_error(text) == {
        "error": "ValueError",
        "message": "Expected dict, got 'yes'\n  field: input\n    detail: not a mapping",
    }


@pytest.mark.parametrize(
    "recorded",
    [
        'Traceback (most recent call last):\n  File "/srv/app/handler.py", line 3, in run\n'
        "    go()\nnot an exception line",
        'Traceback (most recent call last):\n  File "/srv/app/handler.py", line 3, in run',
        "Traceback (most recent call last):",
        '…  File "/srv/app/handler.py", line 3, in run\n    go()',
    ],
)
def test_a_traceback_without_an_exception_line_shows_no_frame(recorded: str) -> None:
    shown = client_error(recorded)
    assert "File" not in shown["message"] and "Traceback" not in shown["message"], shown
    assert "/srv/app" not in str(shown)
