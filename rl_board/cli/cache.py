"""``rl-board cache``: list and clear the parsed caches of the runs one may read."""

from __future__ import annotations

import json
from datetime import UTC

from ..base.access import RootError
from .common import CommandError, printed


def _allowed(run_dir: str, roots) -> bool:
    """Whether a cache's run (a folder, or a URL) is one the allowed roots let this user see."""
    from ..base.access import is_allowed, is_url

    if not is_url(run_dir):
        return is_allowed(run_dir, roots)
    from ..base.location import open_location

    try:
        open_location(run_dir)
    except RootError:
        return False
    return True


def cache_json(args) -> dict:
    """What ``cache --json`` prints (docs/schemas/cache.json): ``list``: the cache's folder, its limit and the
    caches of runs inside the allowed folders, least recently used first; ``clear``: the folder and how many
    run caches were cleared. ``CommandError`` for a run outside the allowed folders."""
    from datetime import datetime

    from ..analysis.provider import cache_limit, clear_caches, default_cache_root, list_caches
    from ..base.access import allowed_roots, check_allowed

    roots = allowed_roots()
    # only caches of runs inside the allowed folders (a cache naming no run is nobody's to show)
    caches = [c for c in list_caches() if roots is None or (c.run_dir() and _allowed(c.run_dir(), roots))]
    if args.run_dir is not None:
        try:
            if isinstance(args.run_dir, str):  # a URL: its door checks the allowed URL prefixes
                from ..base.location import open_location

                wanted = str(open_location(args.run_dir).path)
            else:
                check_allowed(args.run_dir)
                wanted = str(args.run_dir.expanduser().resolve())
        except RootError as exc:
            raise CommandError(str(exc)) from None
        caches = [c for c in caches if c.run_dir() == wanted]
    if args.action == "clear":
        from ..analysis.provider import memo

        cleared = clear_caches(caches)
        # like the caches, only the memos of runs inside the allowed folders
        memo.clear(args.run_dir, allowed=None if roots is None else (lambda run: _allowed(run, roots)))
        return {"root": str(default_cache_root()), "cleared": cleared}
    rows = [{"folder": c.folder.name, "run": c.run_dir(), "bytes": c.size(),
             "last_used": datetime.fromtimestamp(c.last_used(), UTC).isoformat(timespec="seconds")}
            for c in caches]
    return {"root": str(default_cache_root()), "limit_bytes": cache_limit(), "caches": rows}


def _cache(args) -> int:
    result, status = printed(cache_json, args)
    if status is not None:
        return status
    if args.json:
        print(json.dumps(result))
    elif args.action == "clear":
        print(f"cleared {result['cleared']} run cache{'s' if result['cleared'] != 1 else ''} in {result['root']}")
    else:
        rows = result["caches"]
        total = sum(r["bytes"] for r in rows)
        print(f"{result['root']}: {len(rows)} run caches, {total / 2**20:,.1f} MiB "
              f"(limit {result['limit_bytes'] / 2**20:,.0f} MiB; least recently used first)")
        for r in rows:
            print(f"  {r['last_used']}  {r['bytes'] / 2**20:>9,.1f} MiB  {r['run'] or '?'}  ({r['folder']})")
    return 0
