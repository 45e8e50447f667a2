"""The columnar cache: reused when the files are unchanged, never trusted when they are not."""

import json
import os
import time

import numpy as np
import pandas as pd
import pytest
from conftest import sample, write_lines

from rl_board.analysis.source import RunSource
from rl_board.store import ranges

PAD = "<pad>"


def _lines(step: int, count: int, start: int = 0) -> list[dict]:
    return [sample(step, float(start + i), response=f"r{start + i}{PAD}", response_tokens=["a", "b", PAD],
                   logprobs=[-1.0, -0.5 * i, -9.0], ref_logprobs=[-1.5, -1.0, 0.0], values=[0.1, 0.2, 0.3])
            for i in range(count)]


def _run(tmp_path):
    write_lines(tmp_path / "run" / "rank0.jsonl", _lines(1, 3) + ["{bad"] + _lines(2, 2, 10))
    write_lines(tmp_path / "run" / "rank1.jsonl", _lines(1, 2, 20))
    return tmp_path / "run"


def _same_run(a, b) -> None:
    where = ["row", "seg"]  # which segment holds a row depends on how the files were read
    pd.testing.assert_frame_equal(a.samples.drop(columns=where), b.samples.drop(columns=where))
    pd.testing.assert_frame_equal(a.steps, b.steps)
    assert a.report.errors == b.report.errors
    for label in a.samples.index:
        ta, tb = a.sample_tokens(label), b.sample_tokens(label)
        assert ta.tokens == tb.tokens
        for name in ("logprobs", "ref_logprobs", "values", "token_rewards"):
            np.testing.assert_array_equal(getattr(ta, name), getattr(tb, name))


def test_second_open_uses_the_cache_and_matches(tmp_path):
    """An unchanged run reopens from the cache with identical samples, errors and token arrays."""
    run = _run(tmp_path)
    first = RunSource(run, PAD)
    cold = first.refresh()
    assert set(first.last_status.values()) == {"parsed"}
    second = RunSource(run, PAD)
    warm = second.refresh()
    assert set(second.last_status.values()) == {"cached"}
    _same_run(cold, warm)
    assert cold.report.errors == (("rank0.jsonl", 4, warm.report.errors[0][2]),)
    uncached = RunSource(run, PAD, cache_root=False).refresh()
    _same_run(cold, uncached)


def test_appended_lines_are_parsed_alone(tmp_path):
    """Lines appended since the cache was written are read from where it stopped."""
    run = _run(tmp_path)
    RunSource(run, PAD).refresh()
    with open(run / "rank1.jsonl", "a") as fh:
        fh.write('{"step": 3, "reward": 7.5}\n')
    source = RunSource(run, PAD)
    got = source.refresh()
    assert source.last_status == {"rank0.jsonl": "cached", "rank1.jsonl": "appended"}
    assert got.samples["reward"].tolist()[-1] == 7.5 and got.samples["line"].tolist()[-1] == 3
    _same_run(got, RunSource(run, PAD, cache_root=False).refresh())


@pytest.mark.parametrize("change", ["touch", "truncate", "replace", "rewrite_same_size"])
def test_changed_files_are_parsed_again(tmp_path, change):
    """Touching, truncating, replacing or rewriting a file makes the cache re-read it from the start."""
    run = _run(tmp_path)
    RunSource(run, PAD).refresh()
    path = run / "rank0.jsonl"
    time.sleep(0.01)
    if change == "touch":
        os.utime(path, ns=(time.time_ns(), time.time_ns()))
    elif change == "truncate":
        with open(path, "r+b") as fh:
            fh.truncate(len(path.read_bytes().split(b"\n")[0]) + 1)
    elif change == "replace":
        tmp = run / "new.tmp"
        write_lines(tmp, _lines(5, 1, 99))
        os.replace(tmp, path)
    else:
        data = path.read_bytes()
        path.write_bytes(data.replace(b'"reward": 1.0', b'"reward": 8.0'))
    source = RunSource(run, PAD)
    got = source.refresh()
    assert source.last_status["rank0.jsonl"] == "parsed"
    assert source.last_status["rank1.jsonl"] == "cached"
    _same_run(got, RunSource(run, PAD, cache_root=False).refresh())


def test_corrupt_cache_is_ignored_and_rebuilt(tmp_path, isolated_cache):
    """Garbage in a segment file costs a re-parse of the file it held and a note naming it; garbage in the
    manifest a re-parse of the run: never wrong data."""
    run = _run(tmp_path)
    expected = RunSource(run, PAD).refresh()
    victim = sorted(isolated_cache.rglob("seg-*.arrow"))[0]
    victim.write_bytes(b"not arrow at all")
    source = RunSource(run, PAD)
    got = source.refresh()
    assert sorted(source.last_status.values()) == ["cached", "parsed"]
    assert any(victim.name in note and "rebuilt" in note for note in got.report.notes), got.report.notes
    _same_run(expected, got)
    assert set(RunSource(run, PAD).refresh() and RunSource(run, PAD).last_status.values()) <= {"cached", "unchanged"}
    for bad in ("{ half a manifest", '{"version": 2, "pad_token": "<pad>", "files": {"rank0.jsonl": {"x": 1}}}'):
        for manifest in isolated_cache.rglob("manifest.json"):
            manifest.write_text(bad)
        _same_run(expected, RunSource(run, PAD).refresh())


def test_unwritable_cache_still_loads(tmp_path, monkeypatch):
    """When the cache folder can't be written, the run loads without it and says so."""
    run = _run(tmp_path)
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the cache folder should go")
    got = RunSource(run, PAD, cache_root=blocker).refresh()
    assert got.report.lines_ok == 7
    assert any("not caching" in note for note in got.report.notes)


def test_pad_token_has_its_own_cache(tmp_path):
    """Aggregates depend on the pad token, so another pad token never reuses them."""
    run = _run(tmp_path)
    with_pad = RunSource(run, PAD).refresh()
    source = RunSource(run, None)
    without = source.refresh()
    assert set(source.last_status.values()) == {"parsed"}
    assert with_pad.samples["response_len"].iloc[0] == 2 and without.samples["response_len"].iloc[0] == 3


def test_cache_stays_under_its_limit_least_recently_used_first(tmp_path, monkeypatch, isolated_cache):
    """Past RL_BOARD_CACHE_MAX the least recently used run caches go, never the one being written;
    `cache list` shows what is left and `cache clear RUN` removes that run's."""
    import json
    import subprocess
    import sys

    from conftest import REPO

    from rl_board.store.cache import list_caches

    runs = []
    for name in ("old", "mid", "new"):
        write_lines(tmp_path / name / "r.jsonl", [sample(s, 1.0, response="x" * 2000) for s in range(200)])
        runs.append(tmp_path / name)
    for run in runs[:2]:
        RunSource(run).refresh()
    now = time.time()
    for cache in list_caches():  # "last used" is the lock file's mtime: "old" an hour ago, "mid" a minute ago
        used = now - (3600 if cache.run_dir() == str(runs[0].resolve()) else 60)
        os.utime(cache.folder / ".lock", (used, used))
    one = sum(c.size() for c in list_caches()) / 2
    monkeypatch.setenv("RL_BOARD_CACHE_MAX", str(int(one * 2.5)))
    got = RunSource(runs[2]).refresh()
    left = {c.run_dir() for c in list_caches()}
    assert left == {str(runs[1].resolve()), str(runs[2].resolve())}  # "old" went
    assert any("size limit" in note for note in got.report.notes)
    env = {**os.environ, "RL_BOARD_CACHE_DIR": str(isolated_cache)}
    listed = json.loads(subprocess.run([sys.executable, "-m", "rl_board", "cache", "list", "--json"], env=env,
                                       capture_output=True, text=True, cwd=REPO, check=True).stdout)
    assert {c["run"] for c in listed["caches"]} == left
    subprocess.run([sys.executable, "-m", "rl_board", "cache", "clear", str(runs[1])], env=env, check=True,
                   capture_output=True, cwd=REPO)
    assert {c.run_dir() for c in list_caches()} == {str(runs[2].resolve())}


def test_a_line_rewritten_in_the_middle_is_never_served_stale(tmp_path):
    """A line far from both ends rewritten in place (same length) and a line appended: the same source
    and a new process both show the new value, as a fresh parse does."""
    lines = [sample(1, 0.5, response="y" * 80) for _ in range(3000)]  # ~300 KB: the middle is unhashed by head/tail
    path = write_lines(tmp_path / "r.jsonl", lines)
    source = RunSource(tmp_path)
    assert source.refresh().samples["reward"].sum() == 1500.0
    data = path.read_bytes()
    middle = data.index(b"\n", len(data) // 2) + 1
    old = data[middle:data.index(b"\n", middle)]
    new = old.replace(b'"reward": 0.5', b'"reward": 9.5')
    assert len(new) == len(old) and new != old
    path.write_bytes(data[:middle] + new + data[middle + len(old):] + b'{"step": 2, "reward": 1.0}\n')
    expected = 1500.0 + 9.0 + 1.0
    assert source.refresh().samples["reward"].sum() == expected
    assert RunSource(tmp_path).refresh().samples["reward"].sum() == expected


def test_a_manifest_of_the_wrong_shape_is_no_cache(tmp_path, isolated_cache):
    """Valid JSON of the wrong shape in the manifest (a list, files as a list, an entry missing keys or
    with a segment path) loads the run by parsing it, every time, without an error."""
    write_lines(tmp_path / "r.jsonl", [sample(1, 1.0), sample(2, 2.0)])
    RunSource(tmp_path).refresh()
    manifest = next(isolated_cache.rglob("manifest.json"))
    good = json.loads(manifest.read_text())
    entry = next(iter(good["files"].values()))
    bad_shapes = [[1, 2], {**good, "files": []}, {**good, "files": {"r.jsonl": {"size": 1}}},
                  {**good, "files": {"r.jsonl": {**entry, "segments": [["../../etc/passwd", 1]]}}},
                  {**good, "files": {"r.jsonl": {**entry, "offset": "12"}}}]
    for shape in bad_shapes:
        for _ in range(2):
            manifest.write_text(json.dumps(shape))
            run = RunSource(tmp_path).refresh()
            assert run.samples["reward"].tolist() == [1.0, 2.0], shape


@pytest.mark.slow
def test_each_range_is_hashed_as_it_is_read_and_the_spans_cover_the_parsed_part(tmp_path, monkeypatch):
    """A range's parser hashes the bytes it read (the digest equals xxh3-128 of those file bytes); the
    manifest's spans cover [0, offset) without gaps, small ones joined, whatever the appends."""
    import xxhash

    from rl_board.readers import ReadOptions
    from rl_board.readers.formats import jsonl
    from rl_board.store import cache

    path = write_lines(tmp_path / "run" / "r.jsonl", [sample(s, float(s)) for s in range(40)])
    data = path.read_bytes()
    middle = data.index(b"\n", len(data) // 2) + 1
    result = ranges.ingest_range(jsonl, str(path), middle, len(data), None, ReadOptions())
    assert result.digest == xxhash.xxh3_128(data[middle:]).hexdigest()

    monkeypatch.setattr(cache, "SPAN_MIN", 64)  # bytes: every append is a small span
    source = RunSource(tmp_path / "run")
    source.refresh()
    for step in range(40, 60):  # a followed log: one line at a time
        with open(path, "a") as fh:
            fh.write(json.dumps(sample(step, 1.0)) + "\n")
        source.refresh()
    spans = source._files["r.jsonl"].entry.prefix_spans
    data = path.read_bytes()
    assert spans[0][0] == 0 and spans[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert all(d == xxhash.xxh3_128(data[a:b]).hexdigest() for a, b, d in spans)
    assert len(spans) <= len(data) // 64 + 1  # joined: not one span per append


def test_a_rewrite_that_keeps_size_and_time_is_not_served_stale(tmp_path):
    """A file read moments after it was written, then rewritten in place with the same size and
    modification time (the same tick of the file system's clock): hashed before it is trusted, so the new
    value is read, in the same source and in a new one; once settled, it is trusted by size and time.
    ("Moments": within ``SETTLED_NS``, made an hour here so that a busy machine's slow first read still
    counts as one moment after the write.)"""
    from rl_board.store import cache, fingerprints

    path = write_lines(tmp_path / "r.jsonl", [sample(1, 1.0), sample(2, 2.0)])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fingerprints, "SETTLED_NS", 3600 * 10**9)
        source = RunSource(tmp_path)
        assert source.refresh().samples["reward"].tolist() == [1.0, 2.0]
        stat = os.stat(path)
        path.write_bytes(path.read_bytes().replace(b'"reward": 2.0', b'"reward": 7.0'))
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert os.stat(path).st_size == stat.st_size
        assert source.refresh().samples["reward"].tolist() == [1.0, 7.0]
        assert RunSource(tmp_path).refresh().samples["reward"].tolist() == [1.0, 7.0]
    entry = source._files["r.jsonl"].entry
    past = stat.st_mtime_ns - 10 * cache.SETTLED_NS  # a file written long before it was read
    os.utime(path, ns=(past, past))
    entry.mtime_ns, entry.checked_ns = past, stat.st_mtime_ns
    assert entry.status(path) == "same"


def test_a_segment_leaves_out_its_columns_of_one_value_and_they_come_back_bit_for_bit(tmp_path):
    """Columns of one value (every row NaN, -0.0, null, the same int or flag) are not written; read back,
    they are made again in their place with the same type, nulls and bits. A column of two values, the
    texts and where rows lie are always written."""
    import pyarrow as pa

    from rl_board.store.segments import full_schema, with_one_value_columns, write_segment

    n = 5
    table = pa.table({
        "line": pa.array(np.arange(1, n + 1)), "response": pa.array(["x"] * n),  # one value, always kept
        "nan": pa.array(np.full(n, np.nan)), "minus_zero": pa.array(np.full(n, -0.0)),
        "empty": pa.nulls(n, pa.float64()), "count": pa.array(np.zeros(n, np.int32)),
        "flag": pa.array([True] * n), "two": pa.array([1.0, 2.0, 1.0, 1.0, 1.0]),
        "some_null": pa.array([1.0, None, 1.0, 1.0, 1.0]), "extra:x": pa.array(np.full(n, 0.5)),
    }).replace_schema_metadata({b"notes": b"kept"})
    name = write_segment(table, str(tmp_path))
    stored = pa.ipc.open_file(pa.memory_map(str(tmp_path / name))).read_all()
    assert stored.column_names == ["line", "response", "two", "some_null"]
    back = with_one_value_columns(stored)
    assert back.schema.equals(table.schema) and full_schema(stored.schema).equals(table.schema)
    assert back.schema.metadata == {b"notes": b"kept"}
    assert back.drop_columns(["nan"]).equals(table.drop_columns(["nan"]))  # NaN is never equal: bits below
    for column in ("nan", "minus_zero"):
        assert back[column].to_numpy().view(np.int64).tolist() == table[column].to_numpy().view(np.int64).tolist()
    assert back["empty"].null_count == n and back["count"].type == pa.int32()


def _means(summary: dict) -> dict:
    """step -> (samples, mean reward) of a ``summary --json``."""
    return {s["step"]: (s["samples"], s["reward_mean"]) for s in summary["steps"]}


def _edit(path, old: bytes, new: bytes) -> None:
    """Replace the first occurrence of ``old`` in ``path`` by ``new`` (as long), in place: inode and size kept."""
    data = path.read_bytes()
    assert old in data and len(old) == len(new)
    with open(path, "r+b") as fh:
        fh.seek(data.index(old))
        fh.write(new)


def test_a_reward_edited_in_a_segment_is_caught_and_rebuilt(tmp_path, isolated_cache):
    """A reward edited in place in a cached segment (-0.5 -> 24.47) is not served: summary's step 1 mean is
    -0.375 as the log says (not 12.11), and its notes name the segment, rebuilt from the log."""
    from conftest import command, summary_and_notes

    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [sample(step, reward, prompt=f"p{i}", response="x" * (i + 2))
                                  for i, (step, reward) in enumerate([(1, -0.25), (1, -0.5), (2, 0.75), (2, 1.25)])])
    assert command("index", str(run)).returncode == 0  # the command line's read options: summary's cache
    [segment] = isolated_cache.rglob("seg-*.arrow")
    _edit(segment, np.float64(-0.5).tobytes(), np.float64(24.47).tobytes())
    got, notes = summary_and_notes(run)
    assert _means(got) == {1: (2, -0.375), 2: (2, 1.0)}
    assert f"The cache's segment {segment.name} was rebuilt" in notes and "digest" in notes and "a.jsonl" in notes
    again = json.loads(command("index", str(run), "--json").stdout)  # the rebuilt segment is trusted again
    assert (again["files_read"], again["files_cached"]) == (0, 1)


def test_a_segment_with_broken_offsets_is_rebuilt_not_a_traceback(tmp_path, isolated_cache):
    """A text column's offsets (0, 2, 5, 9, 14 as int32: the responses') overwritten in a cached segment so one
    points far past its data: the run opens with the log's rows and a note, no traceback, in the loader
    and in ``summary``."""
    from conftest import command, summary_and_notes

    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [sample(step, reward, prompt=f"p{i}", response="x" * (i + 2))
                                  for i, (step, reward) in enumerate([(1, -0.25), (1, -0.5), (2, 0.75), (2, 1.25)])])
    expected = RunSource(run, cache_root=False).refresh()
    RunSource(run).refresh()
    [segment] = isolated_cache.rglob("seg-*.arrow")
    _edit(segment, np.array([0, 2, 5, 9, 14], np.int32).tobytes(), np.array([0, 2, 1 << 30, 9, 14], np.int32).tobytes())
    source = RunSource(run)
    got = source.refresh()
    assert source.last_status == {"a.jsonl": "parsed"}
    assert got.samples["response_chars"].tolist() == [2, 3, 4, 5]
    pd.testing.assert_frame_equal(got.samples.drop(columns=["row", "seg"]), expected.samples.drop(columns=["row", "seg"]))
    assert any(segment.name in note and "rebuilt" in note for note in got.report.notes)
    isolated_cache.joinpath(segment.parent.name).rename(isolated_cache / "page's")
    assert command("index", str(run)).returncode == 0
    [segment] = (p for p in isolated_cache.rglob("seg-*.arrow") if "page's" not in str(p))
    _edit(segment, np.array([0, 2, 5, 9, 14], np.int32).tobytes(), np.array([0, 2, 1 << 30, 9, 14], np.int32).tobytes())
    summary, notes = summary_and_notes(run)
    assert "Traceback" not in notes and "rebuilt" in notes
    assert _means(summary) == {1: (2, -0.375), 2: (2, 1.0)}


def test_a_segment_that_matches_its_name_but_is_no_arrow_file_is_rebuilt(tmp_path, isolated_cache):
    """A manifest pointed at a file whose name carries the digest of its bytes but which pyarrow can't
    open (or a segment file that is gone): each costs a re-read of the file it held and a note, never an
    exception."""
    from rl_board.store.cache import file_digest, segment_name

    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [sample(1, 0.5), sample(2, 1.5)])
    write_lines(run / "b.jsonl", [sample(1, 2.5)])
    RunSource(run).refresh()
    [manifest] = isolated_cache.rglob("manifest.json")
    junk = manifest.parent / "junk"
    junk.write_bytes(b"ARROW1\x00\x00 but not a file pyarrow opens")
    name = segment_name(file_digest(junk))
    junk.rename(manifest.parent / name)
    raw = json.loads(manifest.read_text())
    gone = raw["files"]["b.jsonl"]["segments"][0][0]
    raw["files"]["a.jsonl"]["segments"][0][0] = name
    (manifest.parent / gone).unlink()
    manifest.write_text(json.dumps(raw))
    source = RunSource(run)
    got = source.refresh()
    assert source.last_status == {"a.jsonl": "parsed", "b.jsonl": "parsed"}
    assert got.samples["reward"].tolist() == [0.5, 2.5, 1.5]  # step 1 (a, b), then step 2
    notes = " ".join(got.report.notes)
    assert f"segment {name} was rebuilt" in notes and f"segment {gone} was rebuilt: it was missing" in notes


def _replace_keeping_size_and_time(path, data: bytes, how: str) -> None:
    """Put ``data`` (as long as ``path``) in ``path`` with its modification time restored: ``cp -p`` of a
    copy (the real command: the file's inode kept, its bytes rewritten), or as ``rsync -a`` does (a
    temporary file with the time set, renamed over it)."""
    import subprocess

    before = path.stat()
    assert len(data) == before.st_size
    other = path.with_name(".other")
    other.write_bytes(data)
    os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
    if how == "cp -p":
        subprocess.run(["cp", "-p", str(other), str(path)], check=True)
        other.unlink()
        assert path.stat().st_ino == before.st_ino
    else:
        os.replace(other, path)
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)


@pytest.mark.parametrize("how", ["cp -p", "rsync -a"])
def test_a_file_replaced_with_its_size_and_time_is_read_again(tmp_path, isolated_cache, how):
    """A settled log (written an hour before it was read) replaced by one of its size with its time
    restored: the run opens with the new rewards (8.0, not 1.0), from the cache for the other file, and
    ``summary`` prints the new step mean, not the one it kept."""
    from conftest import summary_and_notes

    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [sample(1, 1.0, response="one"), sample(2, 2.0, response="two")])
    write_lines(run / "b.jsonl", [sample(1, 3.0, response="three")])
    hour_ago = time.time_ns() - 3600 * 10**9
    for name in ("a.jsonl", "b.jsonl"):
        os.utime(run / name, ns=(hour_ago, hour_ago))
    RunSource(run).refresh()
    first, _ = summary_and_notes(run)
    assert _means(first)[1] == (2, 2.0)
    _replace_keeping_size_and_time(run / "a.jsonl", (run / "a.jsonl").read_bytes().replace(b"1.0", b"8.0"), how)
    source = RunSource(run)
    assert source.refresh().samples["reward"].tolist() == [8.0, 3.0, 2.0]
    assert source.last_status == {"a.jsonl": "parsed", "b.jsonl": "cached"}
    again, _ = summary_and_notes(run)
    assert _means(again) == {1: (2, 5.5), 2: (1, 2.0)}


def test_a_manifest_entry_is_written_as_dataclasses_would_write_it(tmp_path, isolated_cache):
    """The manifest's entry of a file (``FileEntry.to_json``, without ``asdict``'s deep copy) holds every field
    with its value, as ``dataclasses.asdict`` gives it, and reads back as the same entry."""
    import dataclasses

    from rl_board.store.fingerprints import FileEntry

    write_lines(tmp_path / "r.jsonl", [sample(1, 1.0), "{broken", sample(2, 2.0)])
    RunSource(tmp_path).refresh()
    manifest = json.loads(next(isolated_cache.rglob("manifest.json")).read_text())
    written = manifest["files"]["r.jsonl"]
    entry = FileEntry.from_json(written)
    assert written == dataclasses.asdict(entry) == entry.to_json()
    assert list(written) == [f.name for f in dataclasses.fields(FileEntry)]
    assert written["errors"] and written["offset"] == (tmp_path / "r.jsonl").stat().st_size
