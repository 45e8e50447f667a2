"""Runs at URLs (``base.location`` with an fsspec filesystem): ``memory://`` and ``file://`` read the
same as the local folder, the allowed roots are URL prefixes matched part by part, and live follow
sees new, grown and replaced objects. No server needed here (S3 is tested in test_s3.py)."""

from __future__ import annotations

import contextlib
import io
import json
import uuid
from pathlib import Path

import fsspec
import pandas as pd
import pytest
from conftest import REPO, close_to, sample, write_lines

from rl_board.analysis.source import RunSource
from rl_board.base.access import OutsideAllowedFolders, RootError
from rl_board.base.location import open_location
from rl_board.base.remote import RemotePath, fault_line
from rl_board.cli import main
from rl_board.store import ingest, ranges, workers
from rl_board.store.tracking import list_runs

MEMORY = fsspec.filesystem("memory")


def cli(*argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``rl-board ARGV`` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


def to_memory(folder: Path) -> str:
    """Copy ``folder``'s files into the memory filesystem under a fresh prefix; returns its URL."""
    prefix = f"/t-{uuid.uuid4().hex[:8]}/{folder.name}"
    for path in folder.rglob("*"):
        if path.is_file():
            MEMORY.pipe(f"{prefix}/{path.relative_to(folder).as_posix()}", path.read_bytes())
    return "memory://" + prefix


COMMANDS = (("summary", "--json"), ("findings", "--json"), ("search", "--regex", "the", "--json"))


@pytest.mark.slow
@pytest.mark.parametrize("run", ["ppo_demo", "trl_grpo_demo", "prime_rl_tokens_demo"])
def test_a_memory_and_a_file_url_read_as_the_local_folder(run):
    """summary, findings and search of a bundled run (JSONL ranks, TRL parquet, token ids decoded with the
    tokenizer found beside the run) print the same from memory://, file:// and the folder."""
    local = REPO / "rollout_samples" / run
    for command in COMMANDS:
        status, expected, _ = cli(command[0], str(local), *command[1:])
        assert status == 0 and expected
        for url in (to_memory(local), local.resolve().as_uri()):
            status, got, err = cli(command[0], url, *command[1:])
            assert status == 0, err
            assert close_to(json.loads(got), json.loads(expected)), (url, command)
    if run == "prime_rl_tokens_demo":  # the tokenizer beside the run was found and read through its filesystem
        url = to_memory(local)
        assert RunSource(url, cache_root=False).refresh().options.tokenizer == url + "/tokenizer.json"


def test_file_url_ranges_are_read_by_worker_processes(tmp_path, monkeypatch):
    """A file:// run cut into many ranges is parsed by worker processes reading through the location's
    filesystem, with the rows the local folder gives in one process."""
    lines = [sample(i % 5, float(i), prompt=f"p{i}", logprobs=[-1.0, -0.5]) for i in range(400)] + ["{broken"]
    write_lines(tmp_path / "run" / "rank0.jsonl", lines)
    expected = RunSource(tmp_path / "run", cache_root=False).refresh()
    monkeypatch.setattr(ingest, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ranges, "RANGE_BYTES", 3000)
    monkeypatch.setattr(ranges, "MIN_RANGE_BYTES", 3000)
    workers.shutdown()
    seen = []
    real = ingest._run_in_workers
    monkeypatch.setattr(ingest, "_run_in_workers", lambda *a, **k: seen.append((len(a[1]), a[7])) or real(*a, **k))
    got = RunSource((tmp_path / "run").as_uri()).refresh()
    assert seen and seen[0][0] > 5 and seen[0][1].is_url  # many ranges, handed out with the URL's location
    where = ["row", "seg"]
    pd.testing.assert_frame_equal(expected.samples.drop(columns=where), got.samples.drop(columns=where))
    assert got.report.errors == expected.report.errors == (("rank0.jsonl", 401, got.report.errors[0][2]),)


def test_memory_runs_are_read_in_this_process(monkeypatch):
    """Worker processes can't see this process's memory filesystem: its ranges are parsed here."""
    url = to_memory(REPO / "rollout_samples" / "ppo_demo")
    monkeypatch.setattr(ingest, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ingest, "_run_in_workers", lambda *a, **k: pytest.fail("workers were asked"))
    run = RunSource(url).refresh()
    assert len(run.samples) == sum(1 for line in (REPO / "rollout_samples/ppo_demo").glob("*.jsonl")
                                   for _ in line.open())


def test_url_roots_are_prefixes_matched_part_by_part(monkeypatch):
    """With RL_BOARD_ROOTS=memory://team/runs (and a local folder), a run under it opens; ``..`` out
    of it, a look-alike prefix, the parent and another scheme's URL do not, whether they exist or not."""
    MEMORY.pipe("/team/runs/a/r.jsonl", (json.dumps(sample(1, 1.0)) + "\n").encode())
    MEMORY.pipe("/team/runs-evil/a/r.jsonl", (json.dumps(sample(1, 9.0)) + "\n").encode())
    monkeypatch.setenv("RL_BOARD_ROOTS", f"{REPO}:memory://team/runs")
    assert open_location("memory://team/runs/a").path == RemotePath(MEMORY, "/team/runs/a")
    assert open_location("memory://team/runs/./a/../a").path == RemotePath(MEMORY, "/team/runs/a")
    for url in ("memory://team/runs/../runs-evil/a", "memory://team/runs-evil/a", "memory://team",
                "memory://team/runs/../../x", "s3://team/runs/a"):
        with pytest.raises(OutsideAllowedFolders):
            open_location(url)
    assert open_location(REPO / "rollout_samples").path == REPO / "rollout_samples"  # local roots still work
    status, _, err = cli("summary", "memory://team/runs-evil/a")
    assert status == 2 and err.count("\n") == 1 and "outside the allowed folders" in err


def test_s3_roots_refuse_a_look_alike_bucket(monkeypatch):
    """``s3://team`` allows s3://team/x and not s3://team-evil/x nor s3://team/../team-evil/x (no request is
    made: the check is on the normalised URL)."""
    pytest.importorskip("s3fs")
    monkeypatch.setenv("RL_BOARD_ROOTS", "s3://team")
    assert str(open_location("s3://team/runs/a").path) == "s3://team/runs/a"
    for url in ("s3://team-evil/runs/a", "s3://team/../team-evil/a", "s3a://team-evil/a"):
        with pytest.raises(OutsideAllowedFolders):
            open_location(url)


def test_credentials_in_a_url_are_refused():
    """A URL carrying a key (``s3://KEY:SECRET@bucket``) is refused with a message that repeats neither."""
    with pytest.raises(RootError) as caught:
        open_location("s3://AKIAEXAMPLE:sup3rs3cretvalue@bucket/run")
    assert "sup3rs3cretvalue" not in str(caught.value) and "AKIAEXAMPLE" not in str(caught.value)


def test_an_unknown_scheme_is_one_line():
    """A URL of a scheme no fsspec filesystem serves gets one line naming it, exit status 2."""
    status, out, err = cli("summary", "nosuchscheme://bucket/run")
    assert status == 2 and not out and err.count("\n") == 1 and "nosuchscheme://bucket/run" in err


def test_runs_are_listed_under_a_url_root():
    """list_runs of a URL finds the run folders below it, as for a local root."""
    url = to_memory(REPO / "rollout_samples")
    assert list_runs(url) == list_runs(REPO / "rollout_samples")


def test_live_follow_reads_new_grown_and_replaced_objects():
    """A followed memory:// run reads an object that appeared, only the new lines of one rewritten longer
    with its start intact (appended), and the whole of one replaced at the same size."""
    prefix = f"/live-{uuid.uuid4().hex[:8]}"
    first = [sample(1, 1.0), sample(1, 2.0)]
    MEMORY.pipe(f"{prefix}/rank0.jsonl", ("\n".join(map(json.dumps, first)) + "\n").encode())
    source = RunSource("memory://" + prefix)
    assert source.refresh().samples["reward"].tolist() == [1.0, 2.0]
    MEMORY.pipe(f"{prefix}/rank1.jsonl", (json.dumps(sample(2, 5.0)) + "\n").encode())  # new object
    assert sorted(source.refresh().samples["reward"].tolist()) == [1.0, 2.0, 5.0]
    assert source.last_status["rank1.jsonl"] == "parsed"
    MEMORY.pipe(f"{prefix}/rank0.jsonl", ("\n".join(map(json.dumps, first + [sample(3, 7.0)])) + "\n").encode())  # grown
    assert sorted(source.refresh().samples["reward"].tolist()) == [1.0, 2.0, 5.0, 7.0]
    assert source.last_status["rank0.jsonl"] == "appended"
    MEMORY.pipe(f"{prefix}/rank1.jsonl", (json.dumps(sample(2, 6.0)) + "\n").encode())  # replaced, same size
    assert sorted(source.refresh().samples["reward"].tolist()) == [1.0, 2.0, 6.0, 7.0]
    assert source.last_status["rank1.jsonl"] == "parsed"


def test_a_url_run_opens_from_its_cache(isolated_cache):
    """A second reader of an unchanged memory:// run opens it from the cache keyed by the URL, parsing
    nothing; the manifest names the URL and each object's size."""
    url = to_memory(REPO / "rollout_samples" / "ppo_demo")
    first = RunSource(url).refresh()
    second = RunSource(url)
    again = second.refresh()
    assert set(second.last_status.values()) == {"cached"}
    pd.testing.assert_frame_equal(first.samples, again.samples)
    manifest = json.loads(next(isolated_cache.glob("ppo_demo-*/manifest.json")).read_text())
    assert manifest["run_dir"] == url
    assert manifest["files"]["rollout_data_rank0.jsonl"]["size"] == \
        (REPO / "rollout_samples/ppo_demo/rollout_data_rank0.jsonl").stat().st_size


def test_fault_lines_name_the_url_and_keep_secrets_out(monkeypatch):
    """Each kind of store error reads as one line naming the URL; a credential from the environment that
    an error repeats is taken out."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2hunter2hunter2")
    cases = {PermissionError("An error occurred (AccessDenied) when calling GetObject"): "access denied",
             FileNotFoundError("NoSuchKey"): "no such object",
             OSError("InvalidAccessKeyId: the key hunter2hunter2hunter2"): "credentials were refused",
             ConnectionRefusedError("Connection refused"): "can't be reached",
             RuntimeError("weird hunter2hunter2hunter2\nsecond line"): "could not be read",
             FileNotFoundError("s3://b/run/step_403.jsonl"): "no such object",  # a number in a name is no code
             OSError("An error occurred (SlowDown) when calling GetObject (reached max retries: 4)"): "throttling"}
    for exc, meaning in cases.items():
        line = fault_line("s3://b/run", exc)
        assert line.startswith("s3://b/run: ") and meaning in line and "\n" not in line
        assert "hunter2" not in line


def test_a_shared_cache_at_a_url_opens_a_run_another_reader_read(tmp_path, monkeypatch):
    """With RL_BOARD_CACHE_DIR=memory://..., a reader with its own local mirror publishes its segments and
    then the manifest (no temporary key left); a second reader with an empty mirror opens the run from
    them, parsing nothing, with the same rows."""
    url = to_memory(REPO / "rollout_samples" / "ppo_demo")
    shared = f"memory://shared-{uuid.uuid4().hex[:8]}/cache"
    monkeypatch.setenv("RL_BOARD_CACHE_DIR", shared)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "first"))
    first = RunSource(url)
    expected = first.refresh()
    assert set(first.last_status.values()) == {"parsed"}
    published = [p for p in MEMORY.find(shared.replace("memory://", "/"))]
    assert any(p.endswith("/manifest.json") for p in published)
    assert sum(p.rsplit("/", 1)[1].startswith("seg-") for p in published) == 4
    assert not any("/.tmp-" in p for p in published)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "second"))
    second = RunSource(url)
    got = second.refresh()
    assert set(second.last_status.values()) == {"cached"}
    assert (tmp_path / "second").is_dir() and not (tmp_path / "first" / "second").exists()
    pd.testing.assert_frame_equal(expected.samples, got.samples)


@pytest.mark.slow
def test_the_page_opens_a_run_at_a_url_and_its_link_opens_the_same_sample():
    """A memory:// root in the root box lists its runs; Load shows the run; the page's address carries
    the URL root, and opening that address in a new session shows the same step and sample."""
    from page_steps import APP, load, open_page
    from streamlit.testing.v1 import AppTest

    from rl_board.views import keys

    root = to_memory(REPO / "rollout_samples")
    at = load(open_page(root, "ppo_demo"))
    assert not at.exception
    at.slider(key=keys.STEP).set_value(3).run()
    at.selectbox(key=keys.SAMPLE).select_index(2).run()
    shown = [c.value for c in at.code][:2]
    params = dict(at.query_params)
    assert params["root"] == root and params["run"] == "ppo_demo" and params["step"] == "3"
    linked = AppTest.from_file(APP, default_timeout=60)
    linked.query_params.update(params)
    linked.run()
    assert not linked.exception
    assert linked.slider(key=keys.STEP).value == 3 and [c.value for c in linked.code][:2] == shown


def test_the_cache_command_lists_and_clears_a_url_run(monkeypatch):
    """``cache list`` names a memory:// run's cache by its URL (also under URL roots) and ``cache clear URL``
    removes only that run's caches."""
    url = to_memory(REPO / "rollout_samples" / "ppo_demo")
    other = to_memory(REPO / "rollout_samples" / "eval_demo")
    RunSource(url).refresh()
    RunSource(other).refresh()
    monkeypatch.setenv("RL_BOARD_ROOTS", "memory://")
    status, out, _ = cli("cache", "list", "--json")
    listed = {c["run"] for c in json.loads(out)["caches"]}
    assert status == 0 and {url, other} <= listed
    status, _, err = cli("cache", "clear", url)
    assert status == 0, err
    listed = {c["run"] for c in json.loads(cli("cache", "list", "--json")[1])["caches"]}
    assert url not in listed and other in listed


def test_a_compressed_log_at_a_url_reads_as_the_local_one(tmp_path):
    """A gzip-compressed rank file in memory:// is decompressed through the run's filesystem: the same
    rows as the same file read from a local folder."""
    import gzip

    lines = [sample(i % 3, float(i), prompt=f"p{i}") for i in range(40)]
    write_lines(tmp_path / "plain" / "rank0.jsonl", lines)
    packed = tmp_path / "run" / "rank0.jsonl.gz"
    packed.parent.mkdir()
    packed.write_bytes(gzip.compress((tmp_path / "plain" / "rank0.jsonl").read_bytes()))
    local = RunSource(tmp_path / "run", cache_root=False).refresh()
    remote = RunSource(to_memory(tmp_path / "run"), cache_root=False).refresh()
    assert local.samples["reward"].tolist() == [float(i) for i in sorted(range(40), key=lambda i: (i % 3, i))]
    pd.testing.assert_frame_equal(local.samples, remote.samples)


def test_tags_on_a_url_run_are_kept_by_its_url(tmp_path, monkeypatch):
    """A sample of a memory:// run tagged from the command line is listed with its tag afterwards, and the
    same run's local copy carries no tag (tags are kept per run location)."""
    monkeypatch.setenv("RL_BOARD_TAGS_DIR", str(tmp_path / "tags"))
    local = REPO / "rollout_samples" / "ppo_demo"
    url = to_memory(local)
    status, _, err = cli("tags", url, "--sample", "rollout_data_rank0.jsonl:3", "--add", "hack")
    assert status == 0, err
    status, out, _ = cli("tags", url, "--json")
    tagged = [(t["file"], t["line"], t["tags"]) for t in json.loads(out)["samples"]]
    assert status == 0 and tagged == [("rollout_data_rank0.jsonl", 3, ["hack"])]
    status, out, _ = cli("tags", str(local), "--json")
    assert status == 0 and json.loads(out)["samples"] == []


def test_s3_roots_at_the_stores_top_are_refused_and_dots_normalised(monkeypatch):
    """``s3://``, ``s3://.`` and ``s3://bucket/..`` name every bucket: refused as a setting, never read as
    "allow every bucket", and as a run. ``s3://bucket/team/..`` is ``s3://bucket``: it allows that bucket
    only (no request is made)."""
    pytest.importorskip("s3fs")
    for top in ("s3://", "s3://.", "s3://bucket/..", "s3:///"):
        monkeypatch.setenv("RL_BOARD_ROOTS", top)
        with pytest.raises(RootError) as caught:
            open_location("s3://other/x")
        assert "RL_BOARD_ROOTS" in str(caught.value) and "whole store" in str(caught.value)
    monkeypatch.setenv("RL_BOARD_ROOTS", "s3://bucket/team/..")
    assert str(open_location("s3://bucket/x").path) == "s3://bucket/x"
    with pytest.raises(OutsideAllowedFolders):
        open_location("s3://other/x")
    monkeypatch.delenv("RL_BOARD_ROOTS")
    status, _, err = cli("summary", "s3://")
    assert status == 2 and err.count("\n") == 1 and "no bucket" in err


def test_a_file_url_root_contains_its_symlinks_as_a_local_root_does(tmp_path, monkeypatch):
    """With ``RL_BOARD_ROOTS=file:///…/allowed``, a run that is a symlink inside it to a run outside is
    refused, and a file symlinked out of an allowed run is not read; the same holds for the local root."""
    outside = tmp_path / "outside"
    write_lines(outside / "run" / "r.jsonl", [sample(1, 5.0)])
    allowed = tmp_path / "allowed"
    write_lines(allowed / "run" / "r.jsonl", [sample(1, 1.0)])
    (allowed / "link").symlink_to(outside / "run")
    (allowed / "run" / "s.jsonl").symlink_to(outside / "run" / "r.jsonl")
    for root in (allowed.as_uri(), str(allowed)):
        monkeypatch.setenv("RL_BOARD_ROOTS", root)
        base = allowed.as_uri() if root.startswith("file:") else str(allowed)
        with pytest.raises(OutsideAllowedFolders):
            open_location(base + "/link")
        status, out, err = cli("summary", base + "/run", "--json", "--no-cache")
        assert status == 0, err
        assert json.loads(out)["steps"][0]["reward_mean"] == 1.0  # r.jsonl alone: s.jsonl (5.0) not read


SECRET = "Zq9sEkReT0kenValue"


@pytest.mark.parametrize("url", [f"s3://AKIAEXAMPLE:{SECRET}@bucket/run", f"memory://bucket/run?sig={SECRET}",
                                 f"memory://bucket/run?X-Amz-Signature={SECRET}&X-Amz-Date=1",
                                 f"memory://bucket/run?token={SECRET}", f"file:///tmp/run?se=1&sig={SECRET}"])
@pytest.mark.parametrize("command", ["detect", "summary", "metrics", "index"])
def test_credentials_in_a_url_are_refused_by_every_command(isolated_cache, url, command):
    """A URL with a credential in its user part or query gets one line that doesn't repeat it, from
    ``detect`` as from the other commands, and no cache folder is made (none named after it)."""
    status, out, err = cli(command, url)
    assert status == 2 and not out and err.count("\n") == 1 and "credentials" in err, err
    assert SECRET not in err
    assert not [p for p in isolated_cache.rglob("*") if SECRET in p.name or p.is_dir()]


def test_detect_opens_a_url_run_as_the_local_folder():
    """``detect`` goes through the same door as the other commands: a memory:// copy of a bundled run is
    found to be the reader and files the local folder is."""
    local = REPO / "rollout_samples" / "ppo_demo"
    status, expected, _ = cli("detect", str(local), "--json")
    status_url, got, err = cli("detect", to_memory(local), "--json")
    assert status == status_url == 0, err
    want, have = json.loads(expected), json.loads(got)
    assert (have["reader"], have["files"], have["steps"]) == (want["reader"], want["files"], want["steps"])


def test_a_run_folder_that_does_not_open_makes_no_cache_folder(isolated_cache, tmp_path):
    """``summary`` of a folder that isn't there is one error and leaves the cache folder as it was."""
    status, _, err = cli("summary", str(tmp_path / "missing"))
    assert status == 2 and "Run folder not found" in err
    assert list(isolated_cache.iterdir()) == []


def _shared_reader(tmp_path, monkeypatch, url: str, who: str):
    """A reader of ``url`` with a local mirror of its own (``who``) of the shared cache, refreshed."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / who))
    source = RunSource(url)
    return source, source.refresh()


def _two_runs_shared(tmp_path, monkeypatch):
    """Two runs of different rewards published to one memory:// shared cache by a first reader; returns
    (shared URL, run X's URL, X's rows as read, X's and Y's folders in the shared cache)."""
    shared = f"memory://shared-{uuid.uuid4().hex[:8]}/cache"
    monkeypatch.setenv("RL_BOARD_CACHE_DIR", shared)
    x, y = [f"memory://runs-{uuid.uuid4().hex[:8]}/{name}" for name in ("x", "y")]
    for url, reward in ((x, 1.0), (y, 9.0)):
        for i in range(3):
            MEMORY.pipe(f"{url[len('memory://') - 1:]}/r{i}.jsonl",
                        "".join(json.dumps(sample(s, reward, prompt=f"p{s}")) + "\n" for s in (1, 2)).encode())
    source, expected = _shared_reader(tmp_path, monkeypatch, x, "first")
    _shared_reader(tmp_path, monkeypatch, y, "first")
    folders = {}
    for url in (x, y):
        mirror = _shared_reader(tmp_path, monkeypatch, url, "first")[0].cache.folder
        folders[url] = shared.replace("memory://", "/") + "/" + mirror.name
    return shared, x, y, expected, folders


def _segment_keys(folder: str) -> list[str]:
    return sorted(p for p in MEMORY.find(folder) if p.rsplit("/", 1)[1].startswith("seg-"))


def test_a_segment_swapped_in_the_shared_cache_is_refused_and_the_run_read_here(tmp_path, monkeypatch):
    """Run X's segments in the shared cache overwritten with run Y's bytes (rewards 9, not 1): a new
    reader refuses them (their digests are not X's manifest's), says so in a note, and reads X from its
    logs: the same rows as the first reader's."""
    _, x, y, expected, folders = _two_runs_shared(tmp_path, monkeypatch)
    theirs = _segment_keys(folders[y])
    for key, other in zip(_segment_keys(folders[x]), theirs):
        MEMORY.pipe(key, MEMORY.cat(other))
    source, got = _shared_reader(tmp_path, monkeypatch, x, "second")
    assert any("shared cache's copy of this run was not used" in n and "digest" in n for n in got.report.notes)
    assert set(source.last_status.values()) == {"parsed"}
    assert got.samples["reward"].tolist() == expected.samples["reward"].tolist() == [1.0] * 6


def test_a_manifest_copied_from_another_run_is_refused(tmp_path, monkeypatch):
    """Run Y's manifest and segments copied into run X's folder of the shared cache (a whole, consistent
    copy of another run): refused, as it names another run; X is read from its logs."""
    _, x, y, expected, folders = _two_runs_shared(tmp_path, monkeypatch)
    for key in MEMORY.find(folders[y]):
        MEMORY.pipe(folders[x] + "/" + key.rsplit("/", 1)[1], MEMORY.cat(key))
    source, got = _shared_reader(tmp_path, monkeypatch, x, "second")
    assert any("names another run" in n for n in got.report.notes), got.report.notes
    assert set(source.last_status.values()) == {"parsed"}
    assert got.samples["reward"].tolist() == [1.0] * 6


def _point_at_theirs(mine: str, theirs: str) -> None:
    """The attack on the shared cache: the run folder ``theirs``' segments copied into ``mine``, whose manifest
    is pointed at them (each file's segments those of the file of the same name) with its SHA-256 digests
    recomputed; the run, read options and file entries stay ``mine``'s own."""
    import hashlib

    manifest = json.loads(MEMORY.cat(mine + "/manifest.json"))
    their_manifest = json.loads(MEMORY.cat(theirs + "/manifest.json"))
    for name, entry in manifest["files"].items():
        entry["segments"] = their_manifest["files"][name]["segments"]
    named = {seg for entry in manifest["files"].values() for seg, *_ in entry["segments"]}
    for seg in named:
        MEMORY.pipe(f"{mine}/{seg}", MEMORY.cat(f"{theirs}/{seg}"))
    manifest["digests"] = {seg: hashlib.sha256(MEMORY.cat(f"{mine}/{seg}")).hexdigest() for seg in named}
    MEMORY.pipe(mine + "/manifest.json", json.dumps(manifest).encode())


def test_another_runs_segments_with_a_rewritten_manifest_and_digests_are_refused(tmp_path, monkeypatch):
    """Run Y's segments copied into run X's folder of the shared cache, X's manifest pointed at them and its
    SHA-256 digests recomputed (run, read options and file entries X's own): a fresh viewer reads rows of
    the copy again from X's logs, finds rewards 9 where X's lines say 1, refuses the copy with a note,
    and shows X's rows read from its logs."""
    _, x, y, expected, folders = _two_runs_shared(tmp_path, monkeypatch)
    _point_at_theirs(folders[x], folders[y])
    source, got = _shared_reader(tmp_path, monkeypatch, x, "second")
    assert any("shared cache's copy of this run was not used" in n and "is not what your copy" in n
               and "9.0" in n for n in got.report.notes), got.report.notes
    assert set(source.last_status.values()) == {"parsed"}
    assert got.samples["reward"].tolist() == expected.samples["reward"].tolist() == [1.0] * 6


def _table_runs_shared(tmp_path, monkeypatch, change):
    """TRL's completions_*.parquet (the bundled demo) as run X, and run Y the same files with each row's
    accuracy reward given by ``change(row index, value)``, both published to a shared cache by a first
    reader; returns (X's URL, X's rows as read, X's and Y's folders in the shared cache)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shared = f"memory://shared-{uuid.uuid4().hex[:8]}/cache"
    monkeypatch.setenv("RL_BOARD_CACHE_DIR", shared)
    x = to_memory(REPO / "rollout_samples" / "trl_grpo_demo")
    y = f"memory://runs-{uuid.uuid4().hex[:8]}/trl_grpo_demo"
    for path in sorted((REPO / "rollout_samples" / "trl_grpo_demo").glob("*.parquet")):
        table = pq.read_table(path)
        values = [change(i, v) for i, v in enumerate(table["accuracy_reward"].to_pylist())]
        table = table.set_column(table.schema.get_field_index("accuracy_reward"), "accuracy_reward", pa.array(values))
        with MEMORY.open(f"{y[len('memory://') - 1:]}/{path.name}", "wb") as fh:
            pq.write_table(table, fh)
    expected = _shared_reader(tmp_path, monkeypatch, x, "first")[1]
    _shared_reader(tmp_path, monkeypatch, y, "first")
    folders = {url: shared.replace("memory://", "/") + "/" + _shared_reader(tmp_path, monkeypatch, url, "first")[0]
               .cache.folder.name for url in (x, y)}
    return x, expected, folders[x], folders[y]


@pytest.mark.slow
@pytest.mark.parametrize("attacked", [False, True])
def test_a_table_runs_shared_copy_is_checked_against_its_parquet_files(tmp_path, monkeypatch, attacked):
    """Run Y is X with 100 added to every accuracy reward (a quarter of the demo's are NaN, so those rows
    are X's own): X's copy untouched opens in a fresh viewer from the cache with no note (its rows are
    what X's Parquet files hold, read whole); pointed at Y's segments with recomputed digests it is
    refused with a note, every time, and X is read from its files."""
    x, expected, mine, theirs = _table_runs_shared(tmp_path, monkeypatch, lambda i, v: v + 100)
    if attacked:
        _point_at_theirs(mine, theirs)
    source, got = _shared_reader(tmp_path, monkeypatch, x, "second")
    if attacked:
        assert any("shared cache's copy of this run was not used" in n for n in got.report.notes), got.report.notes
        assert set(source.last_status.values()) == {"parsed"}
    else:
        assert not got.report.notes and set(source.last_status.values()) == {"cached"}
    pd.testing.assert_frame_equal(expected.samples, got.samples)
    assert got.samples["reward"].max() < 100


def test_a_table_runs_copy_differing_in_one_row_of_each_file_is_refused(tmp_path, monkeypatch):
    """Y differs from X in one row of each Parquet file (its 4th: accuracy 7.0 where X's is 0 or 1; 1 row
    of 16): a table file read whole to check a drawn row has every row of the copy compared, so the copy
    pointed at Y's segments is refused, the note naming line 4 of a file and Y's reward there (7 plus that
    row's format reward); drawing rows alone would miss that row most of the time (16 rows drawn of 192,
    those of 2 files compared)."""
    import re

    import pyarrow.parquet as pq

    x, expected, mine, theirs = _table_runs_shared(tmp_path, monkeypatch, lambda i, v: 7.0 if i == 3 else v)
    _point_at_theirs(mine, theirs)
    source, got = _shared_reader(tmp_path, monkeypatch, x, "second")
    note = next(n for n in got.report.notes if "shared cache's copy of this run was not used" in n)
    found = re.search(r"its row at line (\d+) of (completions_\d+\.parquet) .* \(reward ([0-9.]+) in the copy\)", note)
    assert found and found[1] == "4", note
    row = pq.read_table(REPO / "rollout_samples" / "trl_grpo_demo" / found[2]).to_pylist()[3]
    assert row["accuracy_reward"] in (0.0, 1.0) and float(found[3]) == 7.0 + row["format_reward"]
    assert set(source.last_status.values()) == {"parsed"}
    pd.testing.assert_frame_equal(expected.samples, got.samples)


def test_the_shared_copy_is_taken_when_it_checks_out(tmp_path, monkeypatch):
    """Untouched, the shared copy opens the run in a second reader without parsing, with no note."""
    _, x, _, expected, _ = _two_runs_shared(tmp_path, monkeypatch)
    source, got = _shared_reader(tmp_path, monkeypatch, x, "second")
    assert set(source.last_status.values()) == {"cached"} and not got.report.notes
    pd.testing.assert_frame_equal(expected.samples, got.samples)


def test_temporary_keys_older_than_a_publish_are_removed(tmp_path, monkeypatch):
    """A temporary key two hours old (a push that died) is removed at the next publish; one a minute old
    (a push under way) is left."""
    from datetime import UTC, datetime, timedelta

    from rl_board.store import shared as shared_cache

    _, x, _, _, folders = _two_runs_shared(tmp_path, monkeypatch)
    old, young = folders[x] + "/.tmp-dead-seg-1.arrow", folders[x] + "/.tmp-alive-seg-2.arrow"
    for key, age in ((old, 7200), (young, 60)):
        MEMORY.pipe(key, b"partial")
        MEMORY.store[key].created = datetime.now(tz=UTC) - timedelta(seconds=age)
    assert shared_cache.TMP_KEY_SECONDS < 7200
    MEMORY.pipe(f"{x[len('memory://') - 1:]}/r9.jsonl", (json.dumps(sample(3, 1.0)) + "\n").encode())
    _shared_reader(tmp_path, monkeypatch, x, "first")  # reads the new file, publishes
    assert not MEMORY.exists(old) and MEMORY.exists(young)


def test_a_shared_cache_url_with_a_credential_is_refused_without_repeating_it(tmp_path, monkeypatch):
    """``RL_BOARD_CACHE_DIR=memory://…?X-Amz-Signature=SECRET``: the run loads from the local cache, a note
    says the URL was refused without the secret, and no file or folder name holds it."""
    monkeypatch.setenv("RL_BOARD_CACHE_DIR", f"memory://cache-{uuid.uuid4().hex[:8]}/c?X-Amz-Signature={SECRET}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    status, out, err = cli("summary", str(REPO / "rollout_samples" / "ppo_demo"))
    assert status == 0 and "credentials" in err and SECRET not in out + err
    assert not [p for p in tmp_path.rglob("*") if SECRET in p.name]
    assert not [p for p in MEMORY.find("/") if SECRET in p]
