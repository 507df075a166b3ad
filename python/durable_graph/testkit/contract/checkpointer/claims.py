"""Claims (SPEC §4, sql/10_claims.sql): claim, renew_claim, release_claim, and the
claim fields of ThreadInfo (rule 9).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ClaimLost, GraphError, ThreadBusy
from durable_graph.core.model import Claim, ClaimPolicy, Submission
from durable_graph.testkit.contract.checkpointer.support import (
    PAST_TTL,
    SLACK,
    T,
    _assert_busy,
    _claim_fields,
    _commit,
    _expired_claim,
    _info,
    _new_thread,
    _released_claim,
    _superseded_claim,
    _within,
)
from durable_graph.testkit.harness import ClockControl


class ClaimsTests:
    """claim, renew_claim and release_claim, and the claim fields of ThreadInfo."""

    # --- claims ---------------------------------------------------------------------------

    def test_claim_returns_claim_for_thread_and_holder(self, store: Checkpointer) -> None:
        policy = ClaimPolicy(ttl=timedelta(seconds=45), renew_every=timedelta(seconds=15))
        claim = store.claim(T, "holder-a", policy)
        assert (claim.thread_id, claim.holder, claim.ttl) == (T, "holder-a", policy.ttl)
        assert claim.token >= 1

    def test_claim_default_policy_ttl_is_30_seconds(self, store: Checkpointer) -> None:
        assert store.claim(T, "h").ttl == timedelta(seconds=30)

    def test_claim_expires_at_store_now_plus_ttl(self, store: Checkpointer) -> None:
        policy = ClaimPolicy(ttl=timedelta(seconds=45), renew_every=timedelta(seconds=15))
        claim = store.claim(T, "h", policy)
        committed = _commit(store, claim, "c1", None)
        gap = claim.expires_at - committed.committed_at
        assert policy.ttl - SLACK <= gap <= policy.ttl

    def test_claim_expires_at_is_timezone_aware_utc(self, store: Checkpointer) -> None:
        assert store.claim(T, "h").expires_at.utcoffset() == timedelta(0)

    def test_first_token_of_a_fresh_store_is_one(self, store: Checkpointer) -> None:
        assert store.claim(T, "h").token == 1

    def test_claim_creates_no_visible_thread(self, store: Checkpointer) -> None:
        store.claim(T, "h")
        assert store.thread(T) is None
        assert store.threads() == []
        assert store.get(T) is None
        assert store.history(T) == []
        assert store.events_after(T, 0) == []

    def test_claim_refused_while_another_claim_is_live(self, store: Checkpointer) -> None:
        store.claim(T, "holder-a")
        _assert_busy(store)

    def test_thread_busy_is_a_graph_error(self, store: Checkpointer) -> None:
        store.claim(T, "holder-a")
        with pytest.raises(GraphError):
            store.claim(T, "holder-b")

    def test_thread_busy_message_names_no_holder_or_token(self, store: Checkpointer) -> None:
        holder = "secret-holder-7d41c9"
        claim = store.claim(T, holder)
        with pytest.raises(ThreadBusy) as raised:
            store.claim(T, "someone-else")
        message = str(raised.value)
        assert holder not in message
        assert f"token {claim.token}" not in message and f"token={claim.token}" not in message

    def test_thread_busy_message_is_the_fixed_text(self, store: Checkpointer) -> None:
        store.claim(T, "holder-a")
        with pytest.raises(ThreadBusy) as raised:
            store.claim(T, "holder-b")
        assert str(raised.value) == "thread has a live claim"

    def test_claims_are_not_reentrant_for_the_same_holder(self, store: Checkpointer) -> None:
        store.claim(T, "holder-a")
        _assert_busy(store, "holder-a")

    def test_claim_is_still_live_just_before_expiry(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        store.claim(T, "holder-a")
        clock.advance(timedelta(seconds=20))
        _assert_busy(store)

    def test_claim_taken_once_previous_claim_expired(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        first, second = _superseded_claim(store, clock)
        assert second.holder == "holder-b" and second.token > first.token

    def test_claim_has_expired_at_its_expires_at(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        store.claim(T, "holder-a")
        clock.advance(timedelta(seconds=30))
        store.claim(T, "holder-b")

    def test_claim_taken_at_once_after_release(self, store: Checkpointer) -> None:
        first = store.claim(T, "holder-a")
        store.release_claim(first)
        assert store.claim(T, "holder-b").token > first.token

    def test_claims_on_different_threads_are_independent(self, store: Checkpointer) -> None:
        store.claim("t-a", "h")
        store.claim("t-b", "h")

    def test_tokens_strictly_increase_across_claims(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        tokens = [store.claim(f"t-{i}", "h").token for i in range(3)]
        claim = store.claim(T, "h")
        store.release_claim(claim)
        tokens.append(claim.token)
        tokens.append(store.claim(T, "h").token)
        clock.advance(PAST_TTL)
        tokens.append(store.claim(T, "h").token)
        assert tokens == sorted(set(tokens))

    def test_tokens_keep_increasing_across_delete_thread(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        assert store.delete_thread(T) is True
        assert store.claim(T, "h").token > claim.token

    def test_claim_and_lease_tokens_share_one_counter(self, store: Checkpointer) -> None:
        first = store.claim(T, "h")
        store.run_queue.submit(Submission(thread_id="q", input=None))
        lease = store.run_queue.lease("w", timedelta(seconds=30))
        assert lease is not None
        last = store.claim("t-2", "h")
        assert first.token < lease.token < last.token

    def test_renew_claim_keeps_token_and_pushes_expiry(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = store.claim(T, "h")
        clock.advance(timedelta(seconds=20))
        renewed = store.renew_claim(claim)
        assert (renewed.token, renewed.thread_id, renewed.holder) == (claim.token, T, "h")
        assert _within(renewed.expires_at - claim.expires_at, timedelta(seconds=20))

    def test_renew_claim_uses_the_claims_ttl(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        policy = ClaimPolicy(ttl=timedelta(minutes=5), renew_every=timedelta(minutes=1))
        claim = store.claim(T, "h", policy)
        clock.advance(timedelta(minutes=2))
        renewed = store.renew_claim(claim)
        assert renewed.ttl == policy.ttl
        assert _within(renewed.expires_at - claim.expires_at, timedelta(minutes=2))

    def test_renewed_claim_stays_live_past_original_expiry(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = store.claim(T, "holder-a")
        clock.advance(timedelta(seconds=20))
        store.renew_claim(claim)
        clock.advance(timedelta(seconds=20))
        _assert_busy(store)

    def test_renew_claim_after_expiry_while_still_current(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _expired_claim(store, clock)
        renewed = store.renew_claim(claim)
        assert renewed.token == claim.token
        _assert_busy(store)

    def test_renew_claim_lost_after_another_claim(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim, _ = _superseded_claim(store, clock)
        with pytest.raises(ClaimLost):
            store.renew_claim(claim)

    def test_renew_claim_lost_after_release(self, store: Checkpointer) -> None:
        claim = _released_claim(store)
        with pytest.raises(ClaimLost):
            store.renew_claim(claim)

    def test_release_claim_lost_when_already_released(self, store: Checkpointer) -> None:
        claim = _released_claim(store)
        with pytest.raises(ClaimLost):
            store.release_claim(claim)

    def test_release_claim_lost_after_another_claim(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim, newer = _superseded_claim(store, clock)
        with pytest.raises(ClaimLost):
            store.release_claim(claim)
        _assert_busy(store, "holder-c")  # the newer claim was not released
        store.release_claim(newer)

    def test_release_of_expired_current_claim_succeeds(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _expired_claim(store, clock)
        store.release_claim(claim)
        with pytest.raises(ClaimLost):
            store.renew_claim(claim)

    def test_claim_with_forged_token_is_claim_lost(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        forged = Claim(T, "h", claim.token + 1000, claim.expires_at, claim.ttl)
        with pytest.raises(ClaimLost):
            _commit(store, forged, "c1", None)

    def test_expired_current_claim_can_still_commit(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _expired_claim(store, clock)
        assert _commit(store, claim, "c1", None).checkpoint_id == "c1"

    def test_commit_with_released_claim_is_claim_lost(self, store: Checkpointer) -> None:
        claim = _released_claim(store)
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c1", None)
        assert store.thread(T) is None

    def test_commit_with_superseded_claim_is_claim_lost(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _new_thread(store)
        clock.advance(PAST_TTL)
        store.claim(T, "newer")
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c2", "c1")
        assert _info(store).head_id == "c1"

    # --- ThreadInfo claim fields (rule 9) -------------------------------------------------

    @pytest.mark.parametrize(
        "elapsed",
        [pytest.param(timedelta(0), id="live"), pytest.param(timedelta(minutes=5), id="expired")],
    )
    def test_thread_info_describes_the_current_claim(
        self, store: Checkpointer, clock: ClockControl, elapsed: timedelta
    ) -> None:
        claim = _new_thread(store)
        clock.advance(elapsed)
        assert _claim_fields(store) == ("worker", claim.expires_at)

    def test_thread_info_follows_a_renewed_claim(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _new_thread(store)
        clock.advance(timedelta(seconds=5))
        renewed = store.renew_claim(claim)
        assert _info(store).claim_expires_at == renewed.expires_at

    def test_thread_info_shows_the_newest_claim(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        _new_thread(store)
        clock.advance(PAST_TTL)
        newer = store.claim(T, "newer")
        assert _claim_fields(store) == ("newer", newer.expires_at)

    def test_thread_info_claim_fields_none_after_release(self, store: Checkpointer) -> None:
        store.release_claim(_new_thread(store))
        assert _claim_fields(store) == (None, None)
