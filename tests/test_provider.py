"""analysis/provider.py, the one door of the page and the commands to the layers below: each name is the
lower layer's own object, a namespace gives its listed members only, and nothing is imported before it
is asked for."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from rl_board.analysis import provider

ROOT = Path(__file__).resolve().parent.parent


def test_each_name_is_its_modules_own_object():
    """Every listed name is the very object its module holds (imported here by the module's own name)."""
    for name, module in provider.NAMES.items():
        assert getattr(provider, name) is getattr(importlib.import_module(module), name), name
    from rl_board.store import cluster, memo, workers

    assert provider.cluster.LAST_READ is cluster.LAST_READ
    assert provider.memo.load is memo.load and provider.workers.warm_up_for is workers.warm_up_for


def test_a_namespace_gives_its_listed_members_only():
    """``provider.workers`` reads ``warm_up`` but refuses a member not listed, naming what is."""
    assert callable(provider.workers.warm_up)
    with pytest.raises(AttributeError, match="warm_up_for"):
        provider.workers.spawn  # noqa: B018
    with pytest.raises(AttributeError):
        provider.no_such_name  # noqa: B018


def test_a_change_to_the_module_shows_through_the_door(monkeypatch):
    """A name is read from its module at each look-up: a module's attribute replaced (as a test does) is
    what the door gives, as when the caller imported the module itself."""
    from rl_board.store import workers

    monkeypatch.setattr(workers, "EARLY_SPAWN_BYTES", 12345)
    assert provider.workers.EARLY_SPAWN_BYTES == 12345


def test_the_door_imports_nothing_until_asked():
    """Importing the provider imports no module of ``store``, ``readers``, ``scalars`` or ``derive`` (a
    command pays only for what it reads); asking for ``discover_runs`` imports its module."""
    code = ("import sys, rl_board.analysis.provider as p\n"
            "low = lambda: sorted(m for m in sys.modules if m.split('.')[:2][-1] in ('store', 'readers', 'scalars', 'derive')"
            " and m.startswith('rl_board.'))\n"
            "print(low()); p.discover_runs; print('rl_board.store.discovery' in low())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True"]


def test_every_member_of_every_namespace_is_its_modules():
    """Each member a namespace lists is the object its module holds under that name."""
    for part, (module, members) in provider.PARTS.items():
        for member in members:
            assert getattr(getattr(provider, part), member) is getattr(importlib.import_module(module), member)


def test_every_name_the_page_and_the_commands_take_from_the_door_is_listed():
    """Each ``from ...provider import NAME`` in ``views`` and ``cli`` (at the top or inside a function, read
    with ``ast``) names a listed name, so a function run only now and then can't fail on a missing one."""
    import ast

    taken = set()
    for folder in ("views", "cli"):
        for path in (ROOT / "rl_board" / folder).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("analysis.provider"):
                    taken |= {alias.name for alias in node.names}
    assert taken and taken <= set(provider.NAMES) | set(provider.PARTS)
    assert "discover_runs" in taken and "memo" in taken  # the check reads both kinds of import
