"""Archive an earlier commit's package and SQL into the repository, for the upgrade tests.

A CI clone may be shallow, so ``tests/test_upgrade.py`` never reads git history: it reads the
tarballs this script writes, ``tests/upgrade/states/<label>.tar.gz``, each the output of

    git archive <commit> python/durable_graph migrations sql tests/node

(gzipped with no name and no timestamp, so the same commit always gives the same bytes), and
``tests/upgrade/states/SOURCES.json``, which records for each tarball where it came from: its
label, the full commit sha, the commit's date, the schema version at that commit (the number of
migrations in ``migrations/``), the tarball's sha256 and the command that made it. The test
checks every tarball against its sha256.

The tree keeps its layout: ``python/durable_graph/_migrations`` and ``_sql`` are symlinks to
``../../migrations`` and ``../../sql``, so an extracted tree runs with
``PYTHONPATH=<extract>/python``.

Usage (from anywhere in the repository)::

    python tools/archive_state.py <commit> [--label 2026-12-04-9f124fb]
    python tools/archive_state.py --check        # every tarball matches SOURCES.json

The label defaults to the commit's date (UTC) and its short sha.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATES = ROOT / "tests" / "upgrade" / "states"
SOURCES = STATES / "SOURCES.json"
PATHS = ("python/durable_graph", "migrations", "sql", "tests/node")
MIGRATION = re.compile(r"^migrations/\d{4}\.[^/]*\.sql$")
LABEL = re.compile(r"^\d{4}-\d{2}-\d{2}-[0-9a-f]{7,40}$")


def git(*args: str) -> bytes:
    """The stdout of one git command run in the repository; raises on a non-zero exit."""
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def schema_version(commit: str) -> int:
    """The number of migrations at `commit` (the schema version its code installs)."""
    names = git("ls-tree", "--name-only", f"{commit}:migrations").decode().split()
    return sum(1 for name in names if MIGRATION.match(f"migrations/{name}"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_sources() -> list[dict[str, object]]:
    if not SOURCES.exists():
        return []
    data = json.loads(SOURCES.read_text())
    if not isinstance(data, list):
        raise SystemExit(f"{SOURCES}: expected a JSON list")
    return data


def write_sources(entries: list[dict[str, object]]) -> None:
    entries = sorted(entries, key=lambda e: (str(e["commit_date"]), str(e["label"])))
    SOURCES.write_text(json.dumps(entries, indent=2) + "\n")


def archive(commit: str, label: str | None) -> dict[str, object]:
    """Write the tarball of `commit` and its entry in SOURCES.json; return the entry."""
    full = git("rev-parse", "--verify", f"{commit}^{{commit}}").decode().strip()
    short = git("rev-parse", "--short=7", full).decode().strip()
    epoch = int(git("show", "-s", "--format=%ct", full).decode().strip())
    date = datetime.fromtimestamp(epoch, tz=UTC)
    if label is None:
        label = f"{date:%Y-%m-%d}-{short}"
    if not LABEL.match(label) or not full.startswith(label.rsplit("-", 1)[1]):
        raise SystemExit(f"label {label!r}: expected YYYY-MM-DD-<short sha of {full}>")
    tar = git("archive", "--format=tar", full, *PATHS)
    buffer = io.BytesIO()
    # mtime=0 and no file name in the header: the same commit always gives the same bytes.
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as out:
        out.write(tar)
    STATES.mkdir(parents=True, exist_ok=True)
    path = STATES / f"{label}.tar.gz"
    path.write_bytes(buffer.getvalue())
    entry: dict[str, object] = {
        "label": label,
        "commit": full,
        "commit_date": date.isoformat(),
        "schema_version": schema_version(full),
        "sha256": sha256(path),
        "command": f"python tools/archive_state.py {full} --label {label}",
        "archived": f"git archive --format=tar {full} {' '.join(PATHS)}, gzipped (level 9, mtime 0)",
    }
    entries = [e for e in load_sources() if e.get("label") != label]
    write_sources([*entries, entry])
    return entry


def check() -> int:
    """Exit status 1 when a tarball is missing or differs from its recorded sha256."""
    bad = 0
    for entry in load_sources():
        path = STATES / f"{entry['label']}.tar.gz"
        if not path.exists():
            print(f"missing: {path}")
            bad += 1
        elif sha256(path) != entry["sha256"]:
            print(f"sha256 differs: {path}")
            bad += 1
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("commit", nargs="?", help="the commit to archive")
    parser.add_argument("--label", help="YYYY-MM-DD-<short sha>; default: the commit's date")
    parser.add_argument("--check", action="store_true", help="verify every tarball's sha256")
    args = parser.parse_args(argv)
    if args.check:
        return check()
    if not args.commit:
        parser.error("a commit is required (or --check)")
    entry = archive(args.commit, args.label)
    print(json.dumps(entry, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
