"""docs/contributing/architecture.md is true to the tree: its Layout block names every module of
``rl_board/`` once, each with its job, and every path it names exists; no page of the contributors'
docs nor any module cites a Markdown file the repository doesn't have."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO

ARCHITECTURE = REPO / "docs" / "contributing" / "architecture.md"
_ENTRY = re.compile(r"^( *)([\w.-]+/|[\w.-]+\.(?:py|toml))(?: +(\S.*))?$")


def layout_entries(text: str) -> list[tuple[str, str]]:
    """(path from the repository's root, its job) of each entry of the Layout section's first ``text``
    block: a name ending in ``/`` (a folder) or ``.py``/``.toml``, two spaces of indentation per
    folder it lies in; a more indented line goes on the line above."""
    section = text.split("## Layout", 1)[1] if "## Layout" in text else ""
    block = re.search(r"```text\n(.*?)```", section, re.S)
    entries, folders = [], []
    for line in (block.group(1) if block else "").splitlines():
        match = _ENTRY.match(line)
        indent = len(line) - len(line.lstrip(" "))
        if not match or indent % 2 or indent // 2 > len(folders):
            continue  # a job's next line
        depth, name = indent // 2, match.group(2)
        folders = folders[:depth]
        entries.append(("/".join([*folders, name]).rstrip("/"), match.group(3) or ""))
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
    return entries


def architecture_problems(text: str, repo: Path) -> list[str]:
    """What the Layout block of ``text`` gets wrong about the tree at ``repo``, each with its mend."""
    entries = layout_entries(text)
    named = [path for path, _ in entries]
    problems = []
    modules = sorted(p.relative_to(repo).as_posix() for p in (repo / "rl_board").rglob("*.py"))
    for module in modules:
        if module not in named:
            *folders, name = module.split("/")
            problems.append(f"{module} is not named: add the line '{'  ' * len(folders)}{name}  <its job>' under "
                            f"'{'  ' * (len(folders) - 1)}{folders[-1]}/' in the Layout block of "
                            "docs/contributing/architecture.md")
    for path, job in entries:
        if not (repo / path).exists():
            problems.append(f"{path} is named but not in the tree: remove or rename its line in the Layout block "
                            "of docs/contributing/architecture.md")
        elif path.endswith(".py") and not job:
            problems.append(f"{path} is named without its job: say what it does on its line")
    problems += [f"{path} is named {named.count(path)} times: keep one line"
                 for path in sorted(set(named)) if named.count(path) > 1]
    return problems


def test_architecture_names_every_module_once_and_nothing_else():
    """Every module of rl_board/ has one line with its job; every path the Layout names exists."""
    problems = architecture_problems(ARCHITECTURE.read_text(encoding="utf-8"), REPO)
    assert not problems, "docs/contributing/architecture.md is not true to the tree:\n" + "\n".join(problems)


def test_the_check_says_which_line_to_add_or_remove(tmp_path):
    """On a tree with a module the page doesn't name and a page naming a module that is gone, the check
    says which line to add (its indentation and folder) and which to remove."""
    for path in ("rl_board/__init__.py", "rl_board/cli/__init__.py", "rl_board/cli/diff.py", "app.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    text = ("## Layout\n\n```text\napp.py        the page\nrl_board/\n  __init__.py   the face\n"
            "  cli/          the command\n    __init__.py  run()\n    gone.py      a command no more\n"
            "                and its job's next line.py\n```\n")
    assert layout_entries(text) == [("app.py", "the page"), ("rl_board", ""), ("rl_board/__init__.py", "the face"),
                                    ("rl_board/cli", "the command"), ("rl_board/cli/__init__.py", "run()"),
                                    ("rl_board/cli/gone.py", "a command no more")]
    assert architecture_problems(text, tmp_path) == [
        "rl_board/cli/diff.py is not named: add the line '    diff.py  <its job>' under '  cli/' in the Layout "
        "block of docs/contributing/architecture.md",
        "rl_board/cli/gone.py is named but not in the tree: remove or rename its line in the Layout block of "
        "docs/contributing/architecture.md",
    ]


def test_no_markdown_file_cited_is_missing():
    """Each ``NAME.md`` a module or a contributors' page cites exists (in the repository, under docs/, or
    beside the page): nothing points at a file outside the repository (a STYLE.md, say)."""
    missing = []
    sources = [*(REPO / "rl_board").rglob("*.py"), *(REPO / "docs" / "contributing").glob("*.md")]
    for source in sources:
        for cited in re.findall(r"[\w./-]+\.md\b", source.read_text(encoding="utf-8")):
            if "NAME" in cited:  # a pattern: docs/formats/NAME.md
                continue
            places = (REPO / cited, REPO / "docs" / cited, source.parent / cited)
            if not any(p.resolve().is_file() for p in places):
                missing.append(f"{source.relative_to(REPO)} cites {cited}")
    assert missing == []


MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
LONGER_ALLOWED: set[str] = set()  # a module allowed over MAX_MODULE_LINES while it is being split


def test_modules_and_functions_stay_short_or_say_why():
    """No module of rl_board/ is over 500 lines, and a function over 80 lines says in its docstring why
    ("Longer than ~80 lines on purpose: ..."), so a long one is a choice, not drift."""
    import ast

    long_modules, long_functions = [], []
    for path in sorted((REPO / "rl_board").rglob("*.py")):
        name = path.relative_to(REPO).as_posix()
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_MODULE_LINES and name not in LONGER_ALLOWED:
            long_modules.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES and "80 lines" not in (ast.get_docstring(node) or ""):
                    long_functions.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert long_modules == [] and long_functions == []
