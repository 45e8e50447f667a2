"""Every ``RL_BOARD_*`` environment setting: found in the code and named in one registry
(``base.defaults.SETTINGS``), a bad value refused in one line before anything is read (the CLI, the page),
and a huge one (``inf``) capped where a cap protects the machine, with a note."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest
from conftest import REPO
from streamlit.testing.v1 import AppTest

from rl_board.base import defaults
from rl_board.base.defaults import CACHE_MAX_ENV, SETTINGS, setting, setting_problems
from rl_board.cli import main

#: the settings that are no number, and what they are (checked where they are read)
NOT_NUMBERS = {"RL_BOARD_ROOTS": "folders and URL prefixes", "RL_BOARD_ROOT": "the root serve shows first",
               "RL_BOARD_CACHE_DIR": "a folder or URL", "RL_BOARD_TAGS_DIR": "a folder", "RL_BOARD_RAY": "an address",
               "RL_BOARD_PHASES": "a flag: set or not", CACHE_MAX_ENV: "a size such as 20G"}


def cli(*argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``rl-board ARGV`` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


def test_every_setting_in_the_code_is_in_the_registry():
    """Each RL_BOARD_* name written in the package (grep) is a numeric setting of SETTINGS or one of the
    few that are no number: none is parsed on its own, unchecked."""
    found = set()
    for path in (REPO / "rl_board").rglob("*.py"):
        found |= set(re.findall(r"RL_BOARD_[A-Z0-9_]*[A-Z0-9]", path.read_text(encoding="utf-8")))
    assert found, "the grep found nothing"
    assert found - set(SETTINGS) - set(NOT_NUMBERS) == set()
    assert set(SETTINGS) <= found  # no stale entry


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_a_bad_value_of_each_setting_is_one_line_and_exit_2(name, monkeypatch):
    """For every numeric setting, a word, nan, a negative number and (where it must be positive) 0 each end
    ``summary`` with exit 2 and one line on stderr naming the setting, nothing on stdout."""
    spec = SETTINGS[name]
    bad = ["lots", "nan", "-1"] + ([] if spec.low_ok else ["0"]) + (["2.5"] if spec.whole else [])
    for value in bad:
        monkeypatch.setenv(name, value)
        status, out, err = cli("summary", str(REPO / "rollout_samples" / "ppo_demo"), "--no-cache")
        lines = err.strip().splitlines()
        assert status == 2 and out == "" and len(lines) == 1, (value, err)
        assert lines[0].startswith(f"error: {name}={value!r} is not a ") and "unset it" in lines[0]


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_inf_and_huge_values_are_capped(name, monkeypatch):
    """inf and 1e308 read as the setting's cap, and setting_problems names the cap in one note."""
    for value in ("inf", "1e308"):
        monkeypatch.setenv(name, value)
        assert setting(name) == SETTINGS[name].cap
        bad, capped = setting_problems()
        assert bad == [] and len(capped) == 1 and capped[0].startswith(f"{name}={value} is more than its cap")


def test_values_read_in_their_units(monkeypatch):
    """1.5 MiB of line limit is 1,572,864 bytes; 0.5 GiB expanded is 536,870,912; 7 errors kept is 7; an
    unset setting is its default."""
    monkeypatch.setenv("RL_BOARD_MAX_LINE_MB", "1.5")
    monkeypatch.setenv("RL_BOARD_MAX_EXPANDED_GB", " 0.5 ")
    monkeypatch.setenv("RL_BOARD_MAX_ERRORS", "7")
    monkeypatch.delenv("RL_BOARD_MAX_RATIO", raising=False)
    assert defaults.max_line_bytes() == 1_572_864 and defaults.max_expanded() == 536_870_912
    assert defaults.max_errors() == 7 and defaults.max_ratio() == 1000


def test_the_issue_s_inf_values_read_the_run_as_the_defaults_do(monkeypatch):
    """RL_BOARD_MAX_ERRORS=inf and RL_BOARD_MAX_LINE_MB=inf (a traceback before): summary --json of ppo_demo
    exits 0 with the same output as with the defaults, and one note per capped setting on stderr."""
    run = str(REPO / "rollout_samples" / "ppo_demo")
    status, expected, _ = cli("summary", run, "--json", "--no-cache")
    assert status == 0
    monkeypatch.setenv("RL_BOARD_MAX_ERRORS", "inf")
    monkeypatch.setenv("RL_BOARD_MAX_LINE_MB", "inf")
    status, got, err = cli("summary", run, "--json", "--no-cache")
    assert status == 0 and json.loads(got) == json.loads(expected)
    notes = [line for line in err.splitlines() if "is more than its cap" in line]
    assert sorted(notes) == ["note: RL_BOARD_MAX_ERRORS=inf is more than its cap: 1,000,000 lines is used.",
                     "note: RL_BOARD_MAX_LINE_MB=inf is more than its cap: 2,047 MiB is used."]


@pytest.mark.slow
def test_the_page_shows_one_message_for_a_bad_setting(monkeypatch):
    """RL_BOARD_MAX_ERRORS=many: the page shows one error (the board is misconfigured) and the setting's
    line, no exception and no runs box; with inf it opens, a caption naming the cap."""
    monkeypatch.setenv("RL_BOARD_MAX_ERRORS", "many")
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    assert not at.exception and len(at.error) == 1 and "misconfigured" in at.error[0].value
    assert [t.value for t in at.text] == [setting_problems()[0][0]] and "RL_BOARD_MAX_ERRORS='many'" in at.text[0].value
    monkeypatch.setenv("RL_BOARD_MAX_ERRORS", "inf")
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    assert not at.exception and not at.error
    assert any("RL_BOARD_MAX_ERRORS=inf is more than its cap: 1,000,000 lines is used." in c.value.replace("\\", "")
               for c in at.caption)
