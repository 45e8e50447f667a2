"""Tags and notes on samples: where they are kept, what keys them, concurrent writers, search, export,
the ``tags`` command and the page's editor, table column and list."""

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import REPO, sample, write_lines
from page_steps import load_run as _open
from page_steps import open_area as _area

from rl_board.analysis import tagged as TG
from rl_board.analysis.search import Query, compute_matches
from rl_board.analysis.source import RunSource, load_run
from rl_board.store import tags as T
from rl_board.store.cache import enforce_limit, list_caches
from rl_board.views import keys

PAD = "<|endoftext|>"
APP = str(REPO / "app.py")


def _cli(*args, env=None):
    proc = subprocess.run([sys.executable, "-m", "rl_board", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=env)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def run_dir(tmp_path):
    """A run of two files: rank0 holds steps 1 and 2, rank1 step 2."""
    run = tmp_path / "runs" / "r"
    write_lines(run / "rank0.jsonl", [
        sample(1, 0.5, prompt="What is 2+2?" + PAD, response="4" + PAD * 2, ground_truth="4"),
        sample(2, 1.0, prompt="Name a colour.", response="red, red, red"),
        sample(2, float("nan"), prompt="Say hi.", response="hi"),
    ])
    write_lines(run / "rank1.jsonl", [
        sample(2, -1.0, prompt="What is 2+2?", response="<img src=x onerror=alert(1)>"),
    ])
    return run


def _label(run, file, line):
    """The label in ``run.samples`` of FILE:LINE, found independently of the tags module."""
    hit = run.samples[(run.samples["file"] == run.files.index(file)) & (run.samples["line"] == line)]
    assert len(hit) == 1
    return hit.index[0]


def _tag(run, file, line, tags, note=""):
    return T.set_tags(run.path, TG.new_entry(run, _label(run, file, line), tags, note))


def test_tags_live_beside_the_cache_never_in_the_log_folder(run_dir, isolated_cache):
    """A tag is written to RL_BOARD_CACHE_DIR/tags/<run>-<hash>.json; the run folder is untouched, and
    evicting or clearing every run cache keeps the tags."""
    before = sorted((p.name, p.stat().st_mtime_ns) for p in run_dir.iterdir())
    run = load_run(run_dir)
    _tag(run, "rank0.jsonl", 2, ["reward hack"], "loops")
    assert sorted((p.name, p.stat().st_mtime_ns) for p in run_dir.iterdir()) == before
    files = list((isolated_cache / "tags").glob("*.json"))
    assert [p.name.startswith("r-") for p in files] == [True]
    stored = json.loads(files[0].read_text())
    assert stored["run_dir"] == str(run_dir.resolve())
    assert stored["samples"]["rank0.jsonl:2"]["tags"] == ["reward hack"]
    assert stored["samples"]["rank0.jsonl:2"]["note"] == "loops"
    assert all(c.folder.name != "tags" for c in list_caches(isolated_cache))
    enforce_limit(isolated_cache / "none", isolated_cache, limit=0)  # every run cache goes
    assert _cli("cache", "clear", env={**os.environ, "RL_BOARD_CACHE_DIR": str(isolated_cache)})[0] == 0
    assert files[0].exists() and T.load_tags(run_dir)["rank0.jsonl:2"].tags == ("reward hack",)


def test_tags_survive_reopening_refreshes_other_settings_and_a_cleared_cache(run_dir):
    """FILE:LINE keys: after lines of an earlier step are appended (labels shift), with another pad token,
    and with no cache, the tag is on the same sample (its response says so)."""
    source = RunSource(run_dir)
    run = source.refresh()
    _tag(run, "rank1.jsonl", 1, ["good"])
    with open(run_dir / "rank0.jsonl", "a") as fh:  # a step-1 sample: every later label moves by one
        fh.write(json.dumps(sample(1, 0.0, prompt="new", response="new one")) + "\n")
    for run in (source.refresh(), load_run(run_dir, pad_token=PAD), load_run(run_dir, cache_root=False)):
        tagged = TG.compute_tagged(run, T.load_tags(run_dir))
        assert len(tagged.frame) == 1 and not tagged.missing
        label = tagged.frame.index[0]
        assert run.with_text(run.samples.loc[[label]])["response"].iloc[0] == "<img src=x onerror=alert(1)>"
        assert list(tagged.frame["tags"]) == [("good",)]


def test_a_rewritten_line_does_not_inherit_the_tag(run_dir):
    """When a file is rewritten and the tagged line is now another sample, the tag is listed as changed
    and shown on no sample; a line that is gone is listed as not loaded."""
    run = load_run(run_dir)
    _tag(run, "rank0.jsonl", 2, ["reward hack"])
    _tag(run, "rank0.jsonl", 3, ["good"])
    write_lines(run_dir / "rank0.jsonl", [sample(1, 0.5, prompt="x", response="y"),
                                          sample(2, 0.0, prompt="other", response="different")])
    run = load_run(run_dir)
    tagged = TG.compute_tagged(run, T.load_tags(run_dir))
    assert tagged.frame.empty
    assert sorted((e.key, why) for e, why in tagged.missing) == [("rank0.jsonl:2", TG.CHANGED),
                                                                 ("rank0.jsonl:3", TG.NOT_LOADED)]


def _add_many(args):
    """In another process: add tags to one shared sample and one sample of its own, one write each."""
    run_dir, root, worker, count = args
    for i in range(count):
        T.update_tags(run_dir, "rank0.jsonl:1", lambda cur, i=i: T.Entry(
            "rank0.jsonl", 1, 1, (*(cur.tags if cur else ()), f"w{worker}-{i}")), root=Path(root))
        T.update_tags(run_dir, f"rank0.jsonl:{100 + worker}", lambda cur, i=i: T.Entry(
            "rank0.jsonl", 100 + worker, 1, (*(cur.tags if cur else ()), f"own{i}")), root=Path(root))
    return worker


@pytest.mark.slow
def test_concurrent_writers_lose_nothing_and_readers_never_see_half_a_file(run_dir, tmp_path):
    """Four processes and four threads tag the same sample at once (each write a read-modify-write):
    every tag of every writer is there at the end; a reader reading all along never fails."""
    root = tmp_path / "tagroot"
    stop, failures, reads = threading.Event(), [], [0]

    def read_all_along():
        while not stop.is_set():
            try:
                T.load_tags(run_dir, root)
                reads[0] += 1
            except T.TagsError as exc:  # a half-written file would land here
                failures.append(exc)

    reader = threading.Thread(target=read_all_along)
    reader.start()
    jobs = [(str(run_dir), str(root), w, 15) for w in range(8)]
    with ProcessPoolExecutor(4) as procs, ThreadPoolExecutor(4) as threads:
        done = list(procs.map(_add_many, jobs[:4])) + list(threads.map(_add_many, jobs[4:]))
    stop.set()
    reader.join()
    assert sorted(done) == list(range(8)) and not failures and reads[0] > 0
    entries = T.load_tags(run_dir, root)
    assert set(entries["rank0.jsonl:1"].tags) == {f"w{w}-{i}" for w in range(8) for i in range(15)}
    for w in range(8):
        assert entries[f"rank0.jsonl:{100 + w}"].tags == tuple(f"own{i}" for i in range(15))
    assert not list(root.glob(".tmp-*"))  # no temporary file left behind


def test_a_save_from_a_stale_view_is_refused(run_dir):
    """Saving over tags another session changed since they were shown raises TagConflict and keeps theirs."""
    run = load_run(run_dir)
    label = _label(run, "rank0.jsonl", 2)
    shown = T.load_tags(run_dir).get("rank0.jsonl:2")  # nothing yet
    T.set_tags(run_dir, TG.new_entry(run, label, ["good"]), shown=None)  # another session
    with pytest.raises(T.TagConflict) as caught:
        T.set_tags(run_dir, TG.new_entry(run, label, ["bad"]), shown=shown)
    assert caught.value.current.tags == ("good",)
    assert T.load_tags(run_dir)["rank0.jsonl:2"].tags == ("good",)
    saved = T.set_tags(run_dir, TG.new_entry(run, label, ["bad"], "x"), shown=caught.value.current)
    assert saved.tags == ("bad",) and T.load_tags(run_dir)["rank0.jsonl:2"].note == "x"
    T.set_tags(run_dir, TG.new_entry(run, label, [], ""))  # no tag and no note: the entry goes
    assert T.load_tags(run_dir) == {}


def test_a_damaged_tags_file_is_named_and_never_overwritten(run_dir):
    """A tags file that is not valid JSON makes loading and saving fail with its path; it stays as it was."""
    path = T.tags_path(run_dir)
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "samples": {"a:1": ')
    run = load_run(run_dir)
    with pytest.raises(T.TagsError, match="damaged"):
        T.load_tags(run_dir)
    with pytest.raises(T.TagsError, match="damaged"):
        _tag(run, "rank0.jsonl", 1, ["good"])
    assert path.read_text() == '{"version": 1, "samples": {"a:1": '


@pytest.mark.parametrize("tag, message", [("a,b", "comma"), ("x" * 101, "at most"), ("*", "not a tag"),
                                          ("line\nbreak", "line break")])
def test_tags_that_cannot_be_kept_are_refused(tag, message):
    """Commas, line breaks, over-long tags and the search wildcard are refused with a reason."""
    with pytest.raises(T.TagsError, match=message):
        T.clean_tags([tag])
    assert T.clean_tags(["  good ", "", "good", "reward hack"]) == ("good", "reward hack")


@pytest.mark.slow
def test_search_by_tag_in_the_core_and_the_command(run_dir):
    """A tag (or '*') narrows a search to the samples carrying it, alone or with a regex."""
    run = load_run(run_dir)
    _tag(run, "rank0.jsonl", 2, ["reward hack", "good"])
    _tag(run, "rank1.jsonl", 1, ["reward hack"])
    _tag(run, "rank0.jsonl", 3, [], "a note only")

    def found(query):
        matches = compute_matches(run, query)
        return [(run.files[int(f)], int(line)) for f, line in zip(matches["file"], matches["line"])]

    assert found(Query(tag="reward hack")) == [("rank0.jsonl", 2), ("rank1.jsonl", 1)]
    assert found(Query(tag="good")) == [("rank0.jsonl", 2)]
    assert found(Query(tag="*")) == [("rank0.jsonl", 2), ("rank0.jsonl", 3), ("rank1.jsonl", 1)]
    assert found(Query(pattern="img", tag="reward hack")) == [("rank1.jsonl", 1)]
    code, out, _ = _cli("search", run_dir, "--tag", "reward hack", "--json")
    assert code == 0
    assert [(s["file"], s["line"], s["reward"]) for s in json.loads(out)["samples"]] == [
        ("rank0.jsonl", 2, 1.0), ("rank1.jsonl", 1, -1.0)]
    assert _cli("search", run_dir, "--json")[0] == 2  # neither --regex nor --tag


def test_the_eval_set_export(run_dir):
    """Each tagged sample is one JSON line: prompt and response without pads, reward (null when NaN),
    tags, note and where it came from; in step, file, line order; a tag filter keeps only its samples."""
    run = load_run(run_dir, pad_token=PAD)
    _tag(run, "rank0.jsonl", 3, ["good"], "short\nand polite")
    _tag(run, "rank0.jsonl", 1, ["reward hack"])
    lines = [json.loads(line) for line in TG.build_eval_set(run, TG.compute_tagged(run, T.load_tags(run_dir)),
                                                           PAD).decode().splitlines()]
    assert lines == [
        {"prompt": "What is 2+2?", "response": "4", "reward": 0.5, "tags": ["reward hack"], "note": "",
         "run": "r", "step": 1, "file": "rank0.jsonl", "line": 1, "ground_truth": "4"},
        {"prompt": "Say hi.", "response": "hi", "reward": None, "tags": ["good"], "note": "short\nand polite",
         "run": "r", "step": 2, "file": "rank0.jsonl", "line": 3, "ground_truth": None},
    ]
    only = TG.build_eval_set(run, TG.compute_tagged(run, T.load_tags(run_dir)), PAD, "good").decode().splitlines()
    assert [json.loads(line)["line"] for line in only] == [3]


@pytest.mark.slow
def test_the_tags_command(run_dir):
    """``tags RUN --sample F:L --add/--remove/--note`` changes one sample; ``tags RUN --json`` lists them;
    ``--export`` prints the eval set; an unknown sample or a lone --add is exit status 2."""
    assert _cli("tags", run_dir, "--sample", "rank1.jsonl:1", "--add", "reward hack", "--add", "odd")[0] == 0
    assert _cli("tags", run_dir, "--sample", "rank1.jsonl:1", "--remove", "odd", "--note", "html in output")[0] == 0
    assert _cli("tags", run_dir, "--sample", "rank0.jsonl:2", "--add", "good", "--json")[0] == 0
    code, out, _ = _cli("tags", run_dir, "--json")
    listed = json.loads(out)
    assert code == 0 and listed["tags"] == {"good": 1, "reward hack": 1}
    assert [(s["step"], s["file"], s["line"], s["tags"], s["note"]) for s in listed["samples"]] == [
        (2, "rank0.jsonl", 2, ["good"], ""), (2, "rank1.jsonl", 1, ["reward hack"], "html in output")]
    code, out, _ = _cli("tags", run_dir, "--export", "--tag", "reward hack", "--pad-token", PAD)
    assert code == 0 and [json.loads(line)["prompt"] for line in out.splitlines()] == ["What is 2+2?"]
    assert _cli("tags", run_dir, "--sample", "rank0.jsonl:1", "--add", "padded")[0] == 0
    code, out, _ = _cli("tags", run_dir, "--export", "--tag", "padded")  # the page's default pad goes
    assert [(e["prompt"], e["response"]) for e in map(json.loads, out.splitlines())] == [("What is 2+2?", "4")]
    code, out, _ = _cli("tags", run_dir, "--export", "--tag", "padded", "--pad-token", "none", "--eos-token", "none")
    assert [json.loads(line)["prompt"] for line in out.splitlines()] == ["What is 2+2?" + PAD]
    settings = json.loads(_cli("tags", run_dir, "--json")[1])["settings"]
    assert (settings["pad_token"], settings["eos_token"]) == (PAD, PAD)
    assert _cli("tags", run_dir, "--sample", "rank9.jsonl:1", "--add", "x")[0] == 2
    assert _cli("tags", run_dir, "--add", "x")[0] == 2
    assert _cli("tags", run_dir, "--sample", "rank0.jsonl:1", "--add", "a,b")[0] == 2
    code, out, _ = _cli("tags", run_dir)
    assert code == 0 and "3 tagged samples" in out


# -- the page ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_tagging_a_sample_on_the_page(run_dir):
    """The editor beside the open sample saves its tags and note to the tags file as they change (no Save
    click); the batch table shows them in its tags and note columns; a tag with a comma is refused with
    the reason, inside its box."""
    at = _open(run_dir.parent, "r")  # step 2, sorted by reward: rank0:2 (1.0) is open
    name = "rank0.jsonl:2"
    at.multiselect(key=f"{keys.TAGS}:{name}").select("reward hack").select("my own tag").run()
    assert not at.exception and [s.value for s in at.success] == ["Saved."]
    assert T.load_tags(run_dir)[name].tags == ("reward hack", "my own tag")
    at.text_area(key=f"{keys.NOTE}:{name}").input("repeats <b>red</b>").run()
    assert not at.exception and [s.value for s in at.success] == ["Saved."]
    entry = T.load_tags(run_dir)[name]
    assert (entry.tags, entry.note, entry.step) == (("reward hack", "my own tag"), "repeats <b>red</b>", 2)
    table = at.dataframe[0].value
    assert table.loc[table["response"] == "red, red, red", ["tags", "note"]].values.tolist() == [
        ["reward hack, my own tag", "repeats <b>red</b>"]]
    others = table.loc[table["response"] != "red, red, red", ["tags", "note"]].values.tolist()
    assert others and all(row == ["", ""] for row in others)  # nothing shown for no tags, not "None"
    explore = _area(at, keys.EXPLORE).dataframe[0].value  # every sample matches an empty search
    assert sorted(explore["tags"]) == [""] * (len(explore) - 1) + ["reward hack, my own tag"]
    _area(at, keys.BATCH)
    at.multiselect(key=f"{keys.TAGS}:{name}").select("a, b").run()
    assert [e.value.split("\n")[0] for e in at.error] == ["Can't save these tags."]
    assert "," in at.error[0].value.split("\n", 1)[1]  # the reason, in the same box
    assert T.load_tags(run_dir)[name].tags == ("reward hack", "my own tag")
    _area(_area(at, keys.EXPLORE), keys.BATCH)


@pytest.mark.slow
def test_a_save_over_another_sessions_change_is_refused_on_the_page(run_dir):
    """When another session tags the open sample after the page showed it, a change keeps theirs and says so."""
    at = _open(run_dir.parent, "r")
    name = "rank0.jsonl:2"
    run = load_run(run_dir)
    T.set_tags(run_dir, TG.new_entry(run, _label(run, "rank0.jsonl", 2), ["good"], "theirs"))  # elsewhere
    at.multiselect(key=f"{keys.TAGS}:{name}").select("bad").run()
    assert not at.exception
    assert any("another session changed" in w.value for w in at.warning)
    assert T.load_tags(run_dir)[name].tags == ("good",)
    assert at.multiselect(key=f"{keys.TAGS}:{name}").value == ["good"]  # the editor shows theirs now


@pytest.mark.slow
def test_the_tagged_samples_list_and_the_explore_filter(run_dir):
    """Tags made elsewhere show in the list of tagged samples (filtered by tag) and filter Explore's
    matches; the list offers the eval-set download."""
    run = load_run(run_dir)
    _tag(run, "rank0.jsonl", 1, ["good"])
    _tag(run, "rank1.jsonl", 1, ["reward hack"], "html")
    at = _open(run_dir.parent, "r", keys.EXPLORE)
    at.toggle(key=keys.SHOW_TAGGED).set_value(True).run()
    listed = [d.value for d in at.dataframe if "tags" in d.value.columns and "step" in d.value.columns][-1]
    assert listed["step"].tolist() == [1, 2] and listed["tags"].tolist() == ["good", "reward hack"]
    at.selectbox(key=keys.TAGGED_FILTER).select("reward hack").run()
    listed = [d.value for d in at.dataframe if "tags" in d.value.columns and "step" in d.value.columns][-1]
    assert listed["response"].tolist() == ["<img src=x onerror=alert(1)>"]
    assert "Download as a JSONL eval set" in [b.proto.label for b in at.get("download_button")]
    at.selectbox(key=keys.EXPLORE_TAG).select("good").run()
    assert any("1 of 4 samples match" in c.value for c in at.caption)
    assert not at.exception


@pytest.mark.slow
def test_the_tags_command_refuses_a_run_outside_the_allowed_folders(run_dir, tmp_path, monkeypatch):
    """With RL_BOARD_ROOTS naming another folder, listing or tagging a run outside it is exit status 2,
    names the reason, prints nothing from it and writes no tags file."""
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    monkeypatch.setenv("RL_BOARD_ROOTS", str(allowed))
    for args in (["--json"], ["--export"], ["--sample", "rank0.jsonl:1", "--add", "x"]):
        code, out, err = _cli("tags", run_dir, *args)
        assert code == 2 and "outside the allowed folders" in err and out == ""
    assert not T.tags_path(run_dir).exists()


@pytest.mark.slow
def test_the_editor_follows_another_sessions_save_until_edited(run_dir):
    """An editor nobody has touched shows what another session saved once the page reruns."""
    at = _open(run_dir.parent, "r")
    run = load_run(run_dir)
    T.set_tags(run_dir, TG.new_entry(run, _label(run, "rank0.jsonl", 2), ["good"], "theirs"))  # elsewhere
    at.selectbox(key=keys.SORT_BY).select("log order").select("reward").run()  # any rerun
    assert at.multiselect(key=f"{keys.TAGS}:rank0.jsonl:2").value == ["good"]
    assert at.text_area(key=f"{keys.NOTE}:rank0.jsonl:2").value == "theirs"
    assert not at.exception


def test_rl_board_tags_dir_moves_the_tags(run_dir, tmp_path, monkeypatch):
    """With RL_BOARD_TAGS_DIR set, tags are kept there (one file per run folder, named after it)."""
    monkeypatch.setenv("RL_BOARD_TAGS_DIR", str(tmp_path / "shared-tags"))
    run = load_run(run_dir)
    _tag(run, "rank0.jsonl", 1, ["good"])
    assert [p.name.split("-")[0] for p in (tmp_path / "shared-tags").glob("*.json")] == ["r"]
    assert T.load_tags(run_dir)["rank0.jsonl:1"].tags == ("good",)


def test_the_eval_set_of_an_agent_run_carries_its_turns():
    """A tagged agent trajectory (prime-rl's traces) is exported with its turns: the user turn asks the
    task's question as the log line holds it."""
    run = load_run(REPO / "rollout_samples" / "prime_rl_agent_demo")
    label = run.samples.index[3]
    T.set_tags(run.path, TG.new_entry(run, label, ["good"]))
    exported = json.loads(TG.build_eval_set(run, TG.compute_tagged(run, T.load_tags(run.path))))
    assert exported["file"].startswith("rollouts/step_") and exported["tags"] == ["good"]
    raw = json.loads((run.path / exported["file"]).read_text().splitlines()[exported["line"] - 1])  # the episode
    user = [m["content"] for m in exported["messages"] if m["role"] == "user"]
    assert user[0] == raw["task"]["data"]["question"]
    assert not T.tags_path(run.path).is_relative_to(REPO)  # beside the cache, not in the shipped demo


@pytest.mark.slow
def test_the_tag_editor_sits_beside_the_response_above_the_tokens(tmp_path):
    """On a run with tokens, the tags box comes right after the sample's texts, before the token view's
    controls (not below the heatmap), and its help says where the tags are kept."""
    write_lines(tmp_path / "runs" / "tok" / "r.jsonl", [sample(1, 1.0, prompt="p", response="xy",
                                                               response_tokens=["x", "y"], logprobs=[-1.0, -2.0],
                                                               ref_logprobs=[-1.5, -1.0])])
    at = _open(tmp_path / "runs", "tok")
    order = [m.key for m in at.multiselect]
    assert order.index(f"{keys.TAGS}:r.jsonl:1") < order.index(keys.TOKEN_METRICS)
    assert "Kept in " in at.multiselect(key=f"{keys.TAGS}:r.jsonl:1").help  # where the tags live, on hover
    assert "RL_BOARD_TAGS_DIR" in at.multiselect(key=f"{keys.TAGS}:r.jsonl:1").help
