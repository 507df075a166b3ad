"""The contract tests of rules SPEC §16.2 amends for a partitioned store.

A store over partitions meets them in their amended form only; one partition (every other
store) meets them exactly as written. `amended_names` lists such tests of a suite class, so a
partitioned run leaves them out (and tests the amended form on its own:
``tests/test_partitions.py``), and `amended` marks a test with the rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])

ROOT = "a child's first commit must share its root's partition (children, fences, copies)"
TOKENS = "fencing tokens are unique store-wide and increase per thread"
ORDER = "entry ids increase per thread, ordered store-wide only within a partition"
KEYS = "a submission key is unique per tenant within its thread's partition"

AMENDED: dict[str, str] = {
    # Checkpointer: thread trees named freely (a child's id not root U+001F suffix).
    "test_copy_thread_copies_history_writes_head_and_effects": ROOT,
    "test_copy_thread_copies_descendants_named_after_the_source": ROOT,
    "test_copy_thread_leaves_the_source_unchanged": ROOT,
    "test_copy_thread_refuses_an_existing_target": ROOT,
    "test_copy_thread_refuses_a_target_with_a_live_claim": ROOT,
    "test_copy_thread_target_continues_a_deleted_threads_numbering": ROOT,
    "test_copied_thread_takes_commits_on_its_head": ROOT,
    "test_copy_thread_keeps_the_paths_and_the_order": ROOT,
    "test_children_pages_list_every_child_once_in_first_commit_order": ROOT,
    "test_children_limit_caps_the_page": ROOT,
    "test_fully_retracted_thread_keeps_its_parent_thread": ROOT,
    "test_delete_thread_cascades_to_descendants": ROOT,
    "test_delete_thread_spares_parents_and_siblings": ROOT,
    "test_descendants_leave_tombstones_too": ROOT,
    "test_delete_thread_ends_claims_of_descendants": ROOT,
    "test_delete_thread_with_current_fence_deletes": ROOT,
    "test_delete_thread_with_stale_fence_is_claim_lost": ROOT,
    "test_delete_thread_marks_open_entries_of_descendants": ROOT,
    "test_commit_with_current_fence_succeeds": ROOT,
    "test_commit_with_released_fence_is_claim_lost": ROOT,
    "test_commit_with_superseded_fence_is_claim_lost": ROOT,
    "test_commit_with_expired_but_current_fence_succeeds": ROOT,
    "test_commit_with_fence_of_deleted_thread_is_claim_lost": ROOT,
    "test_stale_fence_is_reported_before_stale_parent": ROOT,
    "test_parent_thread_id_recorded_on_first_commit": ROOT,
    "test_parent_thread_id_of_later_commits_is_ignored": ROOT,
    "test_parent_thread_id_not_set_by_a_later_commit": ROOT,
    "test_children_listed_in_first_commit_order": ROOT,
    "test_children_not_repeated_by_later_commits": ROOT,
    "test_delete_thread_marks_entries_of_descendants": ROOT,
    # Tokens: one counter per partition, stepping by N.
    "test_first_token_of_a_fresh_store_is_one": TOKENS,
    "test_tokens_strictly_increase_across_claims": TOKENS,
    "test_claim_and_lease_tokens_share_one_counter": TOKENS,
    "test_lease_tokens_increase_across_leases_and_claims": TOKENS,
    # Entry order across threads on different partitions.
    "test_entries_pages_by_entry_id_cursor": ORDER,
    "test_open_entries_any_lists_every_tenant": ORDER,
    "test_open_entries_groups_threads_by_head_entry_id": ORDER,
    "test_open_entries_limit_caps_the_page": ORDER,
    "test_open_entries_pages_of_one_tenant_skip_other_tenants": ORDER,
    # D65's places hold through a proxy (pages never skip or repeat); the threads of different
    # partitions are ordered by their opening entries' ids, which are ordered only within one.
    "test_open_entries_groups_threads_by_the_entry_that_opened_them": ORDER,
    # Keys.
    "test_submit_same_key_different_thread_raises_submission_key_reused": KEYS,
    # Its refused batch writes nothing through a proxy too (D141); its second batch reuses a key
    # on threads of two partitions, which a proxy accepts.
    "test_submit_many_with_a_refused_submission_writes_nothing": KEYS,
}
"""Contract test name -> the §16.2 amendment it meets only in its amended form."""


def amended_names(suite: type) -> dict[str, str]:
    """The tests of ``suite`` (a contract class) that `AMENDED` names, with their rule."""
    names = {n for base in suite.__mro__ for n in vars(base) if n.startswith("test_")}
    return {n: rule for n, rule in AMENDED.items() if n in names}


__all__ = ["AMENDED", "KEYS", "ORDER", "ROOT", "TOKENS", "amended_names"]
