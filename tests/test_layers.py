"""The package's folders are its layers: every import points down (read from the code with ``ast``)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rl_board"

#: what each layer (a folder, or a module beside them) may import of the package, besides itself
MAY_IMPORT = {
    "base": set(),
    "readers": {"base"},
    "scalars": {"base"},
    "derive": {"base", "readers"},
    "store": {"base", "readers", "scalars", "derive"},
    "analysis": {"base", "readers", "scalars", "derive", "store"},
    # the page and the commands read through one door, analysis (``analysis.provider`` for what is not a Run)
    "views": {"base", "analysis"},
    "cli": {"base", "analysis", "demo"},
    "writer": {"base"},
    "demo": {"base"},
}
#: the package's face: ``python -m rl_board`` hands on to the commands
ABOVE_ALL = {"__init__", "__main__"}


def _imported(path: Path, package: Path) -> set[str]:
    """The modules of ``package`` that ``path`` imports (dotted, relative to the package), wherever the
    import stands: at the top, in a function, under ``TYPE_CHECKING``. ``from X import Y`` counts as an
    import of ``X.Y`` where that is a module of the package, else of ``X``. A module named in a string
    (``importlib.import_module("rl_board.analysis.run")``, or a tuple of names imported later) is an
    import of it too: the whole string is the dotted name of a module of the package."""
    parts = path.relative_to(package.parent).with_suffix("").parts
    here = list(parts[:-1])  # the package the file is in (for __init__.py: the folder itself)
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            named = _module_named(node.value, package)
            targets = [named] if named else []
        elif isinstance(node, ast.ImportFrom):
            base = here[:len(here) - (node.level - 1)] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            targets = []
            for alias in node.names:
                inner = f"{module}.{alias.name}".split(".")[1:]
                exists = (package.joinpath(*inner).with_suffix(".py").is_file()
                          or package.joinpath(*inner).is_dir()) if inner else False
                targets.append(f"{module}.{alias.name}" if exists else module)
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        for target in targets:
            if target.startswith(package.name + "."):
                found.add(target[len(package.name) + 1:])
    return found


def _module_named(text: str, package: Path) -> str | None:
    """``text`` when it is the dotted name of a module or folder of ``package`` (``rl_board.store.tags``),
    else None: a string that names a module is an import by name."""
    if not re.fullmatch(rf"{re.escape(package.name)}(\.\w+)+", text):
        return None
    inner = text.split(".")[1:]
    exists = package.joinpath(*inner).with_suffix(".py").is_file() or package.joinpath(*inner).is_dir()
    return text if exists else None


def _layer(dotted: str) -> str:
    return dotted.split(".")[0]


def upward_imports(package: Path) -> list[str]:
    """Every import in ``package`` that a layer may not make: "FILE imports MODULE"."""
    wrong = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        layer = relative.with_suffix("").parts[0]
        if layer in ABOVE_ALL:
            continue
        for target in sorted(_imported(path, package)):
            target_layer = _layer(target)
            if target_layer != layer and target_layer in MAY_IMPORT and target_layer not in MAY_IMPORT.get(layer, set()):
                wrong.append(f"{relative} imports {package.name}.{target}")
    return wrong


@pytest.mark.slow
def test_every_import_points_down():
    """No module imports from a layer above its own (readers < derive < store < analysis < views, cli)."""
    assert upward_imports(PACKAGE) == []


def test_every_module_belongs_to_a_layer():
    """Each module lies in a layer folder or is one of the named modules beside them: the tree is the diagram."""
    loose = [p.name for p in PACKAGE.glob("*.py") if p.stem not in MAY_IMPORT and p.stem not in ABOVE_ALL]
    folders = [p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("__")]
    assert loose == []
    assert sorted(folders) == sorted(k for k in MAY_IMPORT if (PACKAGE / k).is_dir())


def said_to_import(doc: str, layer: str) -> tuple[set[str], set[str]]:
    """(the layers a folder's docstring says it may import, those it says it may not), from its paragraph
    last paragraph on imports, in the three ways they are written: "May import ``a`` and ``b``; nothing of ``c``",
    "May import every layer but ``c``", "Imports nothing (else) of ``rl_board`` (but ``a``)"."""
    paragraph = ([p for p in doc.split("\n\n") if re.search(r"may import|imports nothing", p, re.I)] or [""])[-1]
    named = lambda text: [n for n in re.findall(r"``(\w+)``", text) if n in MAY_IMPORT and n != layer]  # noqa: E731
    if re.search(r"every layer but", paragraph):
        return set(), set(named(paragraph.split("every layer but", 1)[1]))
    if re.search(r"imports nothing", paragraph, re.I):
        rest = paragraph.split(" but ", 1)
        return set(named(rest[1])) if len(rest) > 1 else set(), set()
    allowed, _, refused = paragraph.partition("nothing of")
    return set(named(allowed)), set(named(refused))


def test_each_layer_says_what_it_may_import_as_the_rules_do():
    """Every layer folder's ``__init__.py`` docstring says what it may import, and says what ``MAY_IMPORT``
    (the rules the import check applies) says: each layer it allows is allowed, each it refuses refused."""
    for layer in MAY_IMPORT:
        init = PACKAGE / layer / "__init__.py"
        if not init.parent.is_dir():
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        allowed, refused = said_to_import(doc, layer)
        assert allowed or refused or "nothing else" in doc, f"{layer}/__init__.py does not say what it may import"
        assert allowed <= MAY_IMPORT[layer], f"{layer}/__init__.py allows {allowed - MAY_IMPORT[layer]}"
        assert not refused & MAY_IMPORT[layer], f"{layer}/__init__.py refuses {refused & MAY_IMPORT[layer]}"
        if allowed and refused:  # "May import a, b; nothing of c": the whole list
            assert allowed == MAY_IMPORT[layer], f"{layer}/__init__.py says {allowed}, the rules {MAY_IMPORT[layer]}"


def test_said_to_import_reads_each_way_of_writing_it():
    """The docstring reader gets each phrasing right (hand-written cases), so the check above can fail."""
    assert said_to_import("Holds x.\n\nMay import ``base`` and ``readers``; nothing of ``store``.", "derive") == (
        {"base", "readers"}, {"store"})
    assert said_to_import("May import every layer but ``cli``.", "views") == (set(), {"cli"})
    assert said_to_import("Imports nothing of ``rl_board`` but ``base``.", "demo") == ({"base"}, set())
    assert said_to_import("Imports nothing else of ``rl_board``.", "base") == (set(), set())
    assert said_to_import("Holds x.", "base") == (set(), set())


@pytest.mark.slow
def test_an_upward_import_planted_in_a_copy_of_the_package_is_caught(tmp_path):
    """In a copy of the real package, one upward import planted in a real reader (inside a function,
    the hardest place to see) is the one import the check reports."""
    package = tmp_path / "rl_board"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    assert upward_imports(package) == []
    with (package / "readers" / "formats" / "jsonl.py").open("a") as fh:
        fh.write("\n\ndef _planted():\n    from ...analysis.run import Run\n    return Run\n")
    assert upward_imports(package) == ["readers/formats/jsonl.py imports rl_board.analysis.run"]


def test_an_upward_import_is_caught(tmp_path):
    """The check fails on an upward import, in each form: relative, absolute, inside a function, TYPE_CHECKING,
    a module's name in a string (``importlib.import_module``, a tuple imported later); a docstring that
    mentions a module, or a name that is no module (an entry point group), is none."""
    package = tmp_path / "rl_board"
    for layer in ("base", "readers", "store", "analysis"):
        (package / layer).mkdir(parents=True)
        (package / layer / "__init__.py").write_text("")
    (package / "readers" / "good.py").write_text("from ..base import fields\n")
    (package / "store" / "a.py").write_text("from ..analysis.run import Run\n")
    (package / "analysis" / "tables.py").write_text("")
    (package / "store" / "b.py").write_text("def f():\n    from rl_board.analysis import tables\n")
    (package / "readers" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import store\n")
    (package / "base" / "d.py").write_text("import rl_board.readers.good\n")
    (package / "store" / "e.py").write_text("import importlib\ndef f():\n    importlib.import_module('rl_board.analysis.tables')\n")
    (package / "store" / "f.py").write_text("class L:\n    MODULES = ('rl_board.analysis', 'rl_board.base')\n")
    (package / "store" / "g.py").write_text('"""Built by rl_board.analysis.run."""\nGROUP = "rl_board.notes"\n')
    assert upward_imports(package) == [
        "base/d.py imports rl_board.readers.good",
        "readers/c.py imports rl_board.store",
        "store/a.py imports rl_board.analysis.run",
        "store/b.py imports rl_board.analysis.tables",
        "store/e.py imports rl_board.analysis.tables",
        "store/f.py imports rl_board.analysis",
    ]


@pytest.mark.slow
def test_the_core_imports_no_streamlit():
    """Importing every layer but ``views`` (and the command line) leaves Streamlit unloaded."""
    code = ("import pkgutil, importlib, sys, rl_board\n"
            "for m in pkgutil.walk_packages(rl_board.__path__, 'rl_board.'):\n"
            "    if not m.name.startswith('rl_board.views'):\n"
            "        importlib.import_module(m.name)\n"
            "print('streamlit' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent, check=True)
    assert out.stdout.strip() == "False"
