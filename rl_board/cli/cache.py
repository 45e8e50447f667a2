"""``rl-board cache``: list and clear the parsed caches of the runs one may read."""

from __future__ import annotations

import json
import sys

from ..base.access import RootError

def _cache(args) -> int:
    from datetime import datetime, timezone

    from ..base.access import allowed_roots, check_allowed, is_allowed
    from ..store.cache import cache_limit, clear_caches, default_cache_root, list_caches

    roots = allowed_roots()
    # only caches of runs inside the allowed folders (a cache naming no run is nobody's to show)
    caches = [c for c in list_caches() if roots is None or (c.run_dir() and is_allowed(c.run_dir(), roots))]
    if args.run_dir is not None:
        try:
            check_allowed(args.run_dir)
        except RootError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        wanted = str(args.run_dir.expanduser().resolve())
        caches = [c for c in caches if c.run_dir() == wanted]
    if args.action == "clear":
        from ..store import memo

        cleared = clear_caches(caches)
        # like the caches, only the memos of runs inside the allowed folders
        memo.clear(args.run_dir, allowed=None if roots is None else (lambda run: is_allowed(run, roots)))
        print(f"cleared {cleared} run cache{'s' if cleared != 1 else ''} in {default_cache_root()}")
        return 0
    rows = [{"folder": c.folder.name, "run": c.run_dir(), "bytes": c.size(),
             "last_used": datetime.fromtimestamp(c.last_used(), timezone.utc).isoformat(timespec="seconds")}
            for c in caches]
    if args.json:
        print(json.dumps({"root": str(default_cache_root()), "limit_bytes": cache_limit(), "caches": rows}))
    else:
        total = sum(r["bytes"] for r in rows)
        print(f"{default_cache_root()}: {len(rows)} run caches, {total / 2**20:,.1f} MiB "
              f"(limit {cache_limit() / 2**20:,.0f} MiB; least recently used first)")
        for r in rows:
            print(f"  {r['last_used']}  {r['bytes'] / 2**20:>9,.1f} MiB  {r['run'] or '?'}  ({r['folder']})")
    return 0

