"""Crons through ``durable-graph serve`` with ``langgraph-sdk``'s own client (SPEC §15, §20.3;
D187): create, search, count, update, delete as the reference answers them, options the store
cannot honour refused, and a cron's slots run as ordinary runs of its thread."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from service_support import SERVED_KINDS, served_url

HI = {"messages": [{"role": "user", "content": "hi"}]}
YEARLY = "0 0 1 1 *"  # never due while a test runs


@pytest.fixture(scope="module", params=SERVED_KINDS)
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served_url(request, tmp_path_factory, schema_prefix="cron") as served:
        yield served


def test_crons_are_created_searched_counted_updated_and_deleted(url: str) -> None:
    client: Any = get_sync_client(url=url)
    label = uuid.uuid4().hex
    created = client.crons.create("agent", schedule=YEARLY, input=HI, metadata={"label": label})
    assert created["schedule"] == YEARLY and created["enabled"] is True
    assert created["thread_id"] is None and created["metadata"] == {"label": label}
    assert created["next_run_date"] is not None
    cron_id = created["cron_id"]
    thread_id = client.threads.create()["thread_id"]
    on_thread = client.crons.create_for_thread(thread_id, "agent", schedule=YEARLY, input=HI)
    assert on_thread["thread_id"] == thread_id
    try:
        found = client.crons.search(metadata={"label": label})
        assert [c["cron_id"] for c in found] == [cron_id]
        assert client.crons.count(metadata={"label": label}) == 1
        assert [c["cron_id"] for c in client.crons.search(thread_id=thread_id)] == [
            on_thread["cron_id"]
        ]
        updated = client.crons.update(cron_id, schedule="0 0 2 1 *", enabled=False)
        assert updated["schedule"] == "0 0 2 1 *" and updated["enabled"] is False
        assert client.crons.search(metadata={"label": label}, enabled=False)[0]["enabled"] is False
    finally:
        client.crons.delete(cron_id)
        client.crons.delete(on_thread["cron_id"])
    assert client.crons.count(metadata={"label": label}) == 0
    with pytest.raises(NotFoundError):
        client.crons.delete(cron_id)


def test_a_bad_cron_is_refused_and_nothing_is_stored(url: str) -> None:
    client: Any = get_sync_client(url=url)
    before = client.crons.count()
    with pytest.raises(UnprocessableEntityError):
        client.crons.create("agent", schedule="not a schedule", input=HI)
    with pytest.raises(UnprocessableEntityError):
        client.crons.create("agent", schedule=YEARLY, input=HI, stream_mode=7)
    assert client.crons.count() == before


def _ours_only(request: pytest.FixtureRequest) -> None:
    if request.node.callspec.params["url"] == "reference":
        pytest.skip("ours only")


def test_options_the_store_cannot_honour_are_refused_by_name(
    url: str, request: pytest.FixtureRequest
) -> None:
    """Fail closed: what a cron cannot honour is refused by name (the reference honours an end
    time); a webhook that is no http(s) URL is refused too."""
    _ours_only(request)
    client: Any = get_sync_client(url=url)
    with pytest.raises(UnprocessableEntityError, match="end_time"):
        client.crons.create(
            "agent", schedule=YEARLY, input=HI, end_time=datetime(2030, 1, 1, tzinfo=UTC)
        )
    with pytest.raises(UnprocessableEntityError, match="webhook"):
        client.crons.create("agent", schedule=YEARLY, input=HI, webhook="file:///etc/passwd")


def test_a_schedule_has_five_fields_as_the_references(
    url: str, request: pytest.FixtureRequest
) -> None:
    """Issue 46 item 11: LangGraph Server takes five-field schedules; a six-field (per-second)
    one is refused by name unless the operator allows it (``serve --cron-seconds``, which
    tests/test_service_tenancy.py's server has), and nothing is stored."""
    _ours_only(request)
    client: Any = get_sync_client(url=url)
    before = client.crons.count()
    with pytest.raises(UnprocessableEntityError, match="five fields"):
        client.crons.create("agent", schedule="* * * * * *", input=HI)
    thread_id = client.threads.create()["thread_id"]
    with pytest.raises(UnprocessableEntityError, match="cron-seconds"):
        client.crons.create_for_thread(thread_id, "agent", schedule="*/5 * * * * *", input=HI)
    assert client.crons.count() == before
    label = uuid.uuid4().hex
    made = client.crons.create("agent", schedule=YEARLY, input=HI, metadata={"label": label})
    try:
        with pytest.raises(UnprocessableEntityError, match="five fields"):
            client.crons.update(made["cron_id"], schedule="0 0 0 1 1 *")
        assert client.crons.search(metadata={"label": label})[0]["schedule"] == YEARLY
    finally:
        client.crons.delete(made["cron_id"])
