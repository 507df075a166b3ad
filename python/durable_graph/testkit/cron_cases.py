"""Cron expressions on both sides of the grammar of `durable_graph.core.cron` (issue 37 item 6):
every implementation of the check (Python's, ``sql/72_scheduling.sql``'s ``_dg_cron``, another
language's) refuses each of `BAD_CRONS` and accepts each of `GOOD_CRONS`."""

from __future__ import annotations

# Refused by the Python check and by dg_put_schedule_v1 alike (tests/test_pg_checks.py).
BAD_CRONS = [
    "61 * * * *",
    "* 24 * * *",
    "* * 0 * *",
    "* * 32 * *",
    "* * * 13 *",
    "* * * 0 *",
    "* * * * 8",
    "*/0 * * * *",
    "*/60 * * * *",
    "5-1 * * * *",
    "* * * FOO *",
    "* * * * MOON",
    "@daily",
    "* * * *",
    "* * * * * * *",
    "1,,2 * * * *",
    "1, * * * *",
    "* * 31 2,4 *",
    "* * 30 2 *",
    "* * * * 1#6",
    "* * * * 1#0",
    "* * * * 8L",
    "* * * * L",
    "* * L5 * *",
    "* * 15W * *",
    "? * * * *",
    "1/2/3 * * * *",
    "001 * * * *",
    "* * * * MON-",
    "60 * * * * *",
    "* * * * \u017fun",
    "0 0 * * *\n",
    "",
    "   ",
]
# Accepted by both.
GOOD_CRONS = [
    "* * * * *",
    "0 0 * * *",
    "*/15 9-17 * * MON-FRI",
    "0 12 L * *",
    "0 12 lw * *",
    "0 12 * * 5L",
    "0 12 * * fri#2",
    "30 */2 1,15 jan-jun *",
    "0 0 29 2 *",
    "0 0 31 * *",
    "0 0 31 2 MON",
    "5 4 * * sun",
    "0 30 1 * * *",
    "0\t0 * * *",
    " 0 0 * * * ",
    "0 0 * * 7",
    "1-5/2 * * * *",
    "5/15 * * * *",
    "00 00 01 01 00",
    "0 0 * * 0#05",
]


__all__ = ["BAD_CRONS", "GOOD_CRONS"]
