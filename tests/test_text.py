"""Strings from disk shown literally: Markdown and plotly escaping, cut texts, CSV cells a spreadsheet
would run."""

import csv
import io

import pandas as pd

from rl_board.analysis.figures import build_curve_figure
from rl_board.analysis.tables import build_export_csv
from rl_board.base.text import cut_text, escape_markdown, escape_plotly


def test_escape_markdown_backslashes_every_markdown_character():
    """An image, a link, bold and a colour directive come out with each special character escaped."""
    assert escape_markdown("![x](http://h/x)") == r"\!\[x\]\(http\://h/x\)"
    assert escape_markdown("**b** :red[c] <i>") == r"\*\*b\*\* \:red\[c\] \<i\>"
    assert escape_markdown("plain words 123") == "plain words 123"


def test_escape_plotly_turns_its_html_into_entities():
    """plotly's <a>, <b> and entities become literal text."""
    assert escape_plotly('<a href="http://h">e</a> & <b>') == '&lt;a href="http://h"&gt;e&lt;/a&gt; &amp; &lt;b&gt;'


def test_curve_legend_and_title_show_an_html_name_literally():
    """An extra field named as a link is a legend entry and title of escaped text, not a link."""
    name = '<a href="http://host/e">e</a>'
    steps = pd.DataFrame({"e_mean": [1.0, 2.0], "e_std": [0.0, 0.0]}, index=[1, 2])
    fig = build_curve_figure(steps, ["e"], name, labels={"e": name})
    assert "<a" not in fig.layout.title.text and "<a" not in "".join(t.name or "" for t in fig.data)
    assert '&lt;a href="http://host/e"&gt;e&lt;/a&gt;' in [t.name for t in fig.data]


def test_cut_text_keeps_a_short_text_and_cuts_a_long_one():
    """Up to the limit a text is whole; past it, the first ``limit`` characters and a flag."""
    assert cut_text("abc", 3) == ("abc", False)
    assert cut_text("abcd", 3) == ("abc", True)


def test_csv_export_neutralises_formula_cells_and_keeps_numbers():
    """Cells starting with = + - @ tab or CR get a leading apostrophe; numbers (negative too) stay numbers."""
    table = pd.DataFrame({"response": ["=1+1", "+cmd", "-x", "@SUM(A1)", "\tt", "\rr", "fine"],
                          "reward": [-1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]})
    samples = pd.DataFrame({"step": [1] * 7})
    rows = list(csv.reader(io.StringIO(build_export_csv(table, samples, "=run").decode(), newline="")))
    assert rows[0] == ["run", "step", "response", "reward"]
    assert [r[2] for r in rows[1:]] == ["'=1+1", "'+cmd", "'-x", "'@SUM(A1)", "'\tt", "'\rr", "fine"]
    assert [r[3] for r in rows[1:]] == ["-1.5", "2.0", "3.0", "4.0", "5.0", "6.0", "7.0"]
    assert {r[0] for r in rows[1:]} == {"'=run"}


def test_alert_body_holds_the_detail_literally_below_the_title():
    """A detail holding a ``` fence and Markdown stays one literal block: its fence is four backticks, one
    more than the longest run in the detail, and the detail's lines are kept as they are."""
    from rl_board.base.text import alert_body

    detail = "a.jsonl:3: bad **value**\nthen ```code``` and <b>"
    assert alert_body("While loading:", detail) == "While loading:\n\n````text\n" + detail + "\n````"
    assert alert_body("T", "plain").startswith("T\n\n```text\nplain\n```")
