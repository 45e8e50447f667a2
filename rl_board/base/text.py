"""Strings from disk shown literally: escaped for Markdown (Streamlit labels, captions, badges) and
for plotly's HTML subset (titles, legends, hover text), cut to a size a browser can take, and
neutralised for spreadsheets in CSV exports."""

from __future__ import annotations

import html
import re

MAX_TEXT_CHARS = 100_000  # characters of one text sent to the browser; the download has all
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=&\"'])")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def escape_markdown(text: str) -> str:
    """``text`` with every Markdown (and Streamlit directive) character backslash-escaped, so a label
    or caption shows exactly these characters: no link, image, emphasis, colour or HTML."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


def alert_body(title: str, detail: str) -> str:
    """The body of an alert box holding its whole message: ``title`` (the board's own words, Markdown)
    and below it ``detail`` (text from disk or an exception: names, paths, reasons) as a fenced block,
    shown literally, line by line; the fence is longer than any run of backticks in ``detail``."""
    longest = max((len(run) for run in re.findall(r"`+", detail)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{title}\n\n{fence}text\n{detail}\n{fence}"


def escape_plotly(text: str) -> str:
    """``text`` for a plotly title, legend or hover label: plotly reads a subset of HTML (<a>, <b>,
    <br>, entities), so every <, > and & becomes an entity (with no tag, a quote is just a quote)."""
    return html.escape(str(text), quote=False)


def cut_text(text: str, limit: int = MAX_TEXT_CHARS) -> tuple[str, bool]:
    """(``text`` cut to ``limit`` characters, whether it was cut)."""
    return (text, False) if len(text) <= limit else (text[:limit], True)


def neutralise_cell(value):
    """A CSV cell a spreadsheet would run as a formula (text starting with = + - @ tab or CR) gets a
    leading apostrophe; numbers and other values stay as they are."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value
