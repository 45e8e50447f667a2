"""Extra-field names from disk are data, and a run makes a bounded number of extra-field columns."""

import hashlib
import json
import subprocess
import sys

import pytest
from conftest import write_lines

from rl_board.analysis.source import load_run
from rl_board.base import fields as F

HOSTILE = 'extra<img src=x onerror="…">'  # the key of issue 31: a quote and HTML


def _line(step: int, reward: float, **extra) -> dict:
    return {"step": step, "prompt": "p", "response": "r", "reward": reward, **extra}


def test_a_key_with_a_quote_and_html_is_an_extra_field_shown_literally(tmp_path):
    """A line whose key holds a quote and HTML loads with the run's other lines, its name kept as written."""
    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [_line(1, 1.0), _line(1, 0.5, **{HOSTILE: 2.0}), _line(2, 0.0, **{"a\\b": 3.0})])
    loaded = load_run(run, cache_root=False)
    assert loaded.report.lines_ok == 3 and loaded.report.lines_bad == 0
    assert set(loaded.extras) == {HOSTILE, "a\\b"}
    assert loaded.samples[F.extra_column(HOSTILE)].tolist()[1] == 2.0


@pytest.mark.slow
def test_summary_of_a_run_with_a_hostile_key_prints_no_traceback(tmp_path):
    """``summary`` of a run holding the issue's key exits 0 and prints its steps, no traceback."""
    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [_line(1, 1.0), _line(1, 0.5, **{HOSTILE: 2.0})])
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(run), "--no-cache", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["lines_ok"] == 2


def test_a_name_that_cannot_be_a_column_is_renamed_and_reported(tmp_path):
    """A key holding a newline becomes ``a\\u000ab#HASH`` (32 hex digits of its BLAKE2b hash) and the
    load report names the new name and why."""
    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [_line(1, 1.0, **{"a\nb": 4.0})])
    loaded = load_run(run, cache_root=False)
    expected = "a\\u000ab#" + hashlib.blake2b(b"a\nb", digest_size=16).hexdigest()
    assert loaded.extras == [expected]
    assert loaded.samples[F.extra_column(expected)].tolist() == [4.0]
    assert any(expected in note and "control character" in note for note in loaded.report.notes)


@pytest.mark.slow
def test_distinct_keys_past_the_limit_are_dropped_and_the_samples_load(tmp_path):
    """2,500 lines each with a key of its own (the issue's input): every sample loads, the first 256
    keys met become columns, and the report counts the 2,244 others and names the first ones."""
    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [_line(i // 100, 1.0, **{f"k{i}": float(i)}) for i in range(2500)])
    loaded = load_run(run, cache_root=False)
    assert loaded.report.lines_ok == 2500
    assert sorted(loaded.extras) == sorted(f"k{i}" for i in range(256))
    assert loaded.samples[F.extra_column("k7")].dropna().tolist() == [7.0]
    note = next(n for n in loaded.report.notes if "extra fields" in n)
    assert "2,244 more" in note and '"k256", "k257"' in note


def test_the_limit_is_a_setting(tmp_path, monkeypatch):
    """RL_BOARD_MAX_EXTRA_FIELDS=300 keeps the first 300 keys met."""
    monkeypatch.setenv("RL_BOARD_MAX_EXTRA_FIELDS", "300")
    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [_line(0, 1.0, **{f"k{i}": float(i)}) for i in range(400)])
    loaded = load_run(run, cache_root=False)
    assert sorted(loaded.extras) == sorted(f"k{i}" for i in range(300))


def test_a_kept_field_a_file_dropped_on_its_own_is_named_not_lost_silently(tmp_path, monkeypatch):
    """With a limit of 3, file a meets k1, k2, k3 (the run keeps them); file b, read on its own, meets z1,
    z2, z3 before its k1 and keeps those: the run keeps k1 but b's value of it is not there, and the load
    report names k1 as missing from some samples (it used to say nothing)."""
    monkeypatch.setenv("RL_BOARD_MAX_EXTRA_FIELDS", "3")
    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [_line(0, 1.0, **{f"k{i}": float(i)}) for i in (1, 2, 3)])
    write_lines(run / "b.jsonl", [_line(1, 1.0, **{key: 9.0}) for key in ("z1", "z2", "z3", "k1")])
    loaded = load_run(run, cache_root=False)
    assert sorted(loaded.extras) == ["k1", "k2", "k3"]
    assert loaded.samples[F.extra_column("k1")].dropna().tolist() == [1.0]  # b's 9.0 was dropped with b's cap
    note = next(n for n in loaded.report.notes if "missing from some of its samples" in n)
    assert note.startswith("1 extra field(s) the run keeps") and '("k1")' in note

@pytest.mark.slow
def test_one_line_with_200000_keys_loads_with_the_limit(tmp_path):
    """One line with 200,000 numeric keys (the issue's input) loads as one sample with 256 extra fields."""
    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [_line(1, 1.0, **{f"k{i}": i for i in range(200_000)})])
    loaded = load_run(run, cache_root=False)
    assert loaded.report.lines_ok == 1
    assert len(loaded.extras) == 256
    assert any("199,744 more" in note for note in loaded.report.notes)


def test_the_limit_holds_over_files_and_from_the_cache(tmp_path):
    """Two files of 200 keys each: the run keeps the first file's 200 and the second's first 56, and a
    reopen from the cache reports the same."""
    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [_line(0, 1.0, **{f"a{i}": 1.0}) for i in range(200)])
    write_lines(run / "b.jsonl", [_line(1, 1.0, **{f"b{i}": 1.0}) for i in range(200)])
    cache = tmp_path / "cache"
    for _ in range(2):
        loaded = load_run(run, cache_root=cache)
        assert sorted(loaded.extras) == sorted([f"a{i}" for i in range(200)] + [f"b{i}" for i in range(56)])
        assert any("144 more" in note and '"b56"' in note for note in loaded.report.notes)


@pytest.mark.slow
def test_the_limit_is_a_command_line_option(tmp_path):
    """``summary --max-extra-fields 300`` keeps 300 of 400 distinct keys and its note says 100 more."""
    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [_line(0, 1.0, **{f"k{i}": float(i)}) for i in range(400)])
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(run), "--no-cache", "--json",
                           "--max-extra-fields", "300"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "limit of 300 extra fields, 100 more" in proc.stderr


def test_the_page_loads_a_run_with_a_hostile_key_and_reports_renames(tmp_path):
    """The page loads a run whose keys hold the issue's HTML name and a newline: no exception, the
    sample's extras table shows the HTML name as written, and the load report names the renamed one."""
    from page_steps import load_run as load_on_page

    root = tmp_path / "root"
    write_lines(root / "run" / "a.jsonl", [_line(1, 1.0, **{HOSTILE: 2.0, "a\nb": 1.0}), _line(1, 0.5)])
    at = load_on_page(root, "run")
    assert not at.exception
    assert any(HOSTILE in frame.value.columns for frame in at.dataframe)
    shown = [box.value for box in at.warning]  # the load report's notes, inside the "While loading" box
    assert any("a\\u000ab#" in text and "control character" in text for text in shown)


def test_a_field_mapping_naming_a_key_with_a_quote_reads_it(tmp_path):
    """``reward=my"score`` (a mapped source holding a quote) reads each line's reward from that key; a line
    without it is rejected as missing it, and costs only itself."""
    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [{"step": 1, "response": "r", 'my"score': 0.25},
                                  {"step": 2, "response": "s", 'my"score': 0.75}, {"step": 3, "response": "t"}])
    loaded = load_run(run, cache_root=False, fields=(("reward", 'my"score'),))
    assert loaded.samples["reward"].tolist() == [0.25, 0.75]
    assert [(line, "missing" in why) for _, line, why in loaded.report.errors] == [(3, True)]


def _extras_of_first_sample(run) -> dict:
    """{extra field name: value} of the run's first sample, read through the page's own column names."""
    loaded = load_run(run, cache_root=False)
    return {name: loaded.samples[F.extra_column(name)].iloc[0] for name in loaded.extras}


def test_a_key_spelled_like_a_renamed_key_keeps_its_own_column(tmp_path):
    """A key with a TAB and a second key spelled exactly as the first is renamed: both are columns, each
    with its own value (before, the second took the first's column and one value was lost silently)."""
    from rl_board.readers.extras import column_name

    tab = "a\tb"
    look_alike = column_name(tab)  # the attack: a real key spelled like the renaming
    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [_line(1, 0.0, **{tab: 1.0, look_alike: 2.0})])
    got = _extras_of_first_sample(run)
    assert len(got) == 2 and sorted(got.values()) == [1.0, 2.0]
    assert got[column_name(tab)] == 1.0  # the TAB key under its renaming, the other renamed apart from it


def test_two_long_keys_whose_short_hashes_collide_keep_their_columns(tmp_path):
    """Two keys over 256 characters sharing their first 64 and a 4-byte BLAKE2b hash (found here by brute
    force, the birthday bound of 2**32) are two columns with their own values."""
    seen: dict[bytes, str] = {}
    head = "k" * 300
    for i in range(2_000_000):
        key = f"{head}{i}"
        short = hashlib.blake2b(key.encode(), digest_size=4).digest()
        if short in seen:
            first, second = seen[short], key
            break
        seen[short] = key
    else:
        raise AssertionError("no 4-byte collision among 2,000,000 keys")
    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [_line(1, 0.0, **{first: 1.0, second: 2.0})])
    got = _extras_of_first_sample(run)
    assert len(got) == 2 and sorted(got.values()) == [1.0, 2.0]
