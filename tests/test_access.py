"""Allowed folders: with RL_BOARD_ROOTS set, nothing outside can be listed or loaded, by any entry point."""

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import REPO, sample, write_lines
from streamlit.testing.v1 import AppTest

from rl_board.analysis.source import load_run
from rl_board.base.access import OutsideAllowedFolders
from rl_board.store.loader import list_runs
from rl_board.views import keys


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """allowed/{run, link -> secret/run}, secret/run, and RL_BOARD_ROOTS = allowed."""
    allowed, secret = tmp_path / "allowed", tmp_path / "secret"
    write_lines(allowed / "run" / "r.jsonl", [sample(1, 1.0)])
    write_lines(secret / "run" / "r.jsonl", [sample(1, 99.0)])
    (allowed / "link").symlink_to(secret / "run")
    (allowed / "run" / "stolen.jsonl").symlink_to(secret / "run" / "r.jsonl")
    monkeypatch.setenv("RL_BOARD_ROOTS", str(allowed))
    return allowed, secret


def test_listing_and_loading_stop_at_the_allowed_folders(layout):
    """Inside loads; outside, a .. escape and a symlink out are refused; a symlinked subfolder or
    file pointing out is neither listed nor read."""
    allowed, secret = layout
    assert list_runs(allowed) == ["run"]  # not "link"
    run = load_run(allowed / "run", cache_root=False)
    assert run.files == ("r.jsonl",) and run.samples["reward"].tolist() == [1.0]
    for path in (secret, secret / "run", allowed / ".." / "secret" / "run", allowed / "link", "~"):
        with pytest.raises(OutsideAllowedFolders, match="outside the allowed folders"):
            list_runs(path) if path in (secret, "~") else load_run(path, cache_root=False)


def test_unset_means_as_before(tmp_path, monkeypatch):
    """Without RL_BOARD_ROOTS every folder can be read."""
    monkeypatch.delenv("RL_BOARD_ROOTS", raising=False)
    write_lines(tmp_path / "anywhere" / "r.jsonl", [sample(1, 1.0)])
    assert list_runs(tmp_path) == ["anywhere"]


@pytest.mark.slow
def test_command_line_refuses_outside(layout):
    """summary and search exit 2 naming the folder; nothing is printed from it."""
    allowed, secret = layout
    for command in (["summary", str(secret / "run"), "--json"], ["search", str(secret / "run"), "--regex", ".", "--json"]):
        proc = subprocess.run([sys.executable, "-m", "rl_board", *command], capture_output=True, text=True, cwd=REPO,
                              env=os.environ.copy())
        assert proc.returncode == 2 and "outside the allowed folders" in proc.stderr and proc.stdout == ""
    ok = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(allowed / "run"), "--json", "--no-cache"],
                        capture_output=True, text=True, cwd=REPO, env=os.environ.copy())
    assert json.loads(ok.stdout)["lines_ok"] == 1


@pytest.mark.slow
def test_page_and_link_refuse_outside(layout):
    """Typing an outside root, or opening a link to one, says so and lists no run."""
    allowed, secret = layout
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    at.sidebar.text_input(key=keys.ROOT).input(str(secret)).run()
    assert any("outside the allowed folders" in t.value for t in at.sidebar.text)
    assert len(at.sidebar.selectbox) == 0 or keys.RUN not in [s.key for s in at.sidebar.selectbox]
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
    at.query_params.update(root=str(secret), run="run")
    at.run()
    assert any("outside the allowed folders" in t.value for t in at.sidebar.text)
    assert not at.dataframe and not at.exception


def _trainer_state(folder, loss):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": loss}]}))
    return folder / "trainer_state.json"


def _page_texts(at) -> list[str]:
    return [t.value for t in at.text] + [w.value for w in at.warning]


@pytest.mark.slow
def test_metrics_path_outside_gets_one_message_whether_or_not_it_exists(layout):
    """A typed metrics path outside (a folder with trainer state, a file, nothing) shows no series and
    the same words with only the path differing: no existence oracle."""
    allowed, secret = layout
    _trainer_state(secret / "m", 123.0)
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    at.sidebar.text_input(key=keys.ROOT).input(str(allowed)).run()
    at.sidebar.button(key=keys.LOAD).click().run()
    at.session_state[keys.AREA] = keys.TRAINER
    at.run()
    seen = []
    for path in (secret / "m", secret / "m" / "trainer_state.json", secret / "nothing", secret / "nothing" / "x"):
        at.sidebar.text_input(key=keys.METRICS_PATH).input(str(path)).run()
        texts = _page_texts(at)
        assert not any(t.startswith("trl: ") for t in texts) and not at.exception
        seen.append(sorted(t.replace(str(path), "PATH") for t in texts if "PATH" in t.replace(str(path), "PATH")
                           or "metrics path" in t))
    assert seen[0] == seen[1] == seen[2] == seen[3]
    assert any("outside the allowed folders" in t for t in seen[0])


def test_discovery_never_looks_outside_the_allowed_folders(tmp_path, monkeypatch):
    """A trainer_state.json in the run's grandparent, outside the allowed folder, is not found (it is
    without RL_BOARD_ROOTS)."""
    from rl_board.scalars import discover

    state = _trainer_state(tmp_path, 1.0)  # tmp/trainer_state.json; the run is tmp/allowed/run
    write_lines(tmp_path / "allowed" / "run" / "r.jsonl", [sample(1, 1.0, prompt="p", response="r")])
    monkeypatch.delenv("RL_BOARD_ROOTS", raising=False)
    assert discover(tmp_path / "allowed" / "run") == state
    monkeypatch.setenv("RL_BOARD_ROOTS", str(tmp_path / "allowed"))
    assert discover(tmp_path / "allowed" / "run") is None


def _tensorboard_events(folder):
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder))
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="train/kl", simple_value=0.5)])
    writer.add_event(event_pb2.Event(wall_time=1.0, step=1, summary=summary))
    writer.close()
    return next(folder.glob("events.out.tfevents.*"))


@pytest.mark.slow
def test_metrics_command_follows_no_symlink_out_of_an_allowed_folder(layout):
    """A trainer state, checkpoint, event file or metrics JSONL symlinked from inside to outside is not
    read: exit 2, nothing printed; the same files inside are read (exit 0)."""
    allowed, secret = layout
    sources = {
        "state": (_trainer_state(secret / "s", 7.0), "trainer_state.json"),
        "checkpoint": (_trainer_state(secret / "c", 7.0), "checkpoint-5/trainer_state.json"),
        "events": (_tensorboard_events(secret / "tb"), None),
        "jsonl": (write_lines(secret / "j" / "m.jsonl", [{"step": 1, "loss": 7.0}]), "metrics.jsonl"),
    }
    for name, (target, link) in sources.items():
        inside = allowed / f"m-{name}"
        inside.mkdir()
        link_path = inside / (link or target.name)
        link_path.parent.mkdir(parents=True, exist_ok=True)
        link_path.symlink_to(target)
        proc = subprocess.run([sys.executable, "-m", "rl_board", "metrics", str(inside), "--json"],
                              capture_output=True, text=True, cwd=REPO, env=os.environ.copy())
        assert (proc.returncode, proc.stdout) == (2, ""), name
        link_path.unlink()
        link_path.write_bytes(target.read_bytes())  # the same bytes, really inside: read
        proc = subprocess.run([sys.executable, "-m", "rl_board", "metrics", str(inside), "--json"],
                              capture_output=True, text=True, cwd=REPO, env=os.environ.copy())
        assert proc.returncode == 0, (name, proc.stderr)


def test_a_log_replaced_by_a_symlink_out_is_not_read_again(layout):
    """After loading, r.jsonl becomes a symlink to an outside file: the JSONL download and the sample's
    record read nothing from it."""
    from rl_board.readers import SourceChanged

    allowed, secret = layout
    run = load_run(allowed / "run", cache_root=False)
    victim = allowed / "run" / "r.jsonl"
    assert run.source_lines(run.samples.index) == victim.read_bytes()  # before: the line itself
    victim.unlink()
    victim.symlink_to(secret / "run" / "r.jsonl")  # same length, reward 99.0
    assert run.source_lines(run.samples.index) == b""
    with pytest.raises(SourceChanged):
        run.record_parts(run.samples.index[0])


@pytest.mark.slow
@pytest.mark.parametrize("value", [" ", ":", " : ", "/no/such/folder/anywhere"])
def test_blank_or_unusable_roots_is_an_error_not_allow_all(tmp_path, monkeypatch, value):
    """RL_BOARD_ROOTS blank, only separators, or naming nothing that exists: the CLI exits 2 saying so,
    the page shows an error and offers no folder to open."""
    from rl_board.base.access import RootsMisconfigured, allowed_roots

    write_lines(tmp_path / "run" / "r.jsonl", [sample(1, 1.0)])
    monkeypatch.setenv("RL_BOARD_ROOTS", value)
    with pytest.raises(RootsMisconfigured):
        allowed_roots()
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(tmp_path / "run"), "--json"],
                          capture_output=True, text=True, cwd=REPO, env=os.environ.copy())
    assert proc.returncode == 2 and "RL_BOARD_ROOTS" in proc.stderr and proc.stdout == ""
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    assert "RL_BOARD_ROOTS" in " ".join(t.value for t in at.text) and at.error and not at.exception
    assert keys.ROOT not in [t.key for t in at.sidebar.text_input]


@pytest.mark.slow
def test_cache_command_lists_and_clears_only_allowed_runs(layout, isolated_cache):
    """With RL_BOARD_ROOTS set, `cache list` shows only the inside run's cache and `cache clear` leaves
    the outside run's cache and summary memo in place (the memos are always written: files settled)."""
    allowed, secret = layout
    settled = time.time() - 60  # older than the memo's two-second settling, however slow the machine
    for path in (allowed / "run" / "r.jsonl", secret / "run" / "r.jsonl"):
        os.utime(path, (settled, settled))
    env = os.environ.copy()
    del env["RL_BOARD_ROOTS"]
    for folder in (allowed / "run", secret / "run"):
        subprocess.run([sys.executable, "-m", "rl_board", "summary", str(folder)], capture_output=True,
                       cwd=REPO, env=env, check=True)
    runs = [p for p in isolated_cache.iterdir() if (p / "manifest.json").exists()]
    memos = sorted(json.loads(p.read_text())["run"] for p in (isolated_cache / "memos").glob("*.json"))
    assert len(runs) == 2 and sorted(p.name for p in isolated_cache.iterdir()) == sorted(
        [p.name for p in runs] + ["memos"])
    assert memos == sorted([str((allowed / "run").resolve()), str((secret / "run").resolve())])
    proc = subprocess.run([sys.executable, "-m", "rl_board", "cache", "list", "--json"], capture_output=True,
                          text=True, cwd=REPO, env=os.environ.copy())
    assert [c["run"] for c in json.loads(proc.stdout)["caches"]] == [str((allowed / "run").resolve())]
    subprocess.run([sys.executable, "-m", "rl_board", "cache", "clear"], cwd=REPO, env=os.environ.copy(),
                   capture_output=True, check=True)
    left = [p for p in isolated_cache.iterdir() if (p / "manifest.json").exists()]
    assert len(left) == 1 and json.loads((left[0] / "manifest.json").read_text())["run_dir"] == str(
        (secret / "run").resolve())
    assert [json.loads(p.read_text())["run"] for p in (isolated_cache / "memos").glob("*.json")] == [
        str((secret / "run").resolve())]


ODD_PATHS = ["/srv/a\0b", "~nosuchuser-rl-board", "/tmp/" + "x" * 300]


@pytest.mark.slow
@pytest.mark.parametrize("odd", ODD_PATHS)
def test_odd_paths_get_a_plain_message_not_a_traceback(tmp_path, odd):
    """A root or metrics path with a NUL byte, an unknown ~user or a 300-character name is refused in
    words; the page raises nothing."""
    write_lines(tmp_path / "run" / "r.jsonl", [sample(1, 1.0)])
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    at.sidebar.text_input(key=keys.ROOT).input(odd).run()
    assert not at.exception and at.sidebar.error
    at.sidebar.text_input(key=keys.ROOT).input(str(tmp_path)).run()
    at.sidebar.button(key=keys.LOAD).click().run()
    at.session_state[keys.AREA] = keys.TRAINER
    at.sidebar.text_input(key=keys.METRICS_PATH).input(odd).run()
    assert not at.exception and any("metrics path" in w.value for w in at.warning)
    assert not any("Traceback" in t for t in _page_texts(at))


def test_serve_passes_every_setting_of_the_config_file(tmp_path):
    """Every setting in .streamlit/config.toml (but the port and address, which serve takes as options)
    is on serve's command line with the same value, so starting it from another folder loses none."""
    import tomllib

    from rl_board.cli import _parser, serve_command

    config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    wanted = {f"{section}.{name}": value for section, options in config.items() for name, value in options.items()
              if f"{section}.{name}" not in ("server.port", "server.address")}
    assert {"client.showErrorDetails", "global.minCachedMessageSize"} <= set(wanted)
    command = serve_command(_parser().parse_args(["serve"]))
    given = dict(zip(command[5::2], command[6::2]))
    for name, value in wanted.items():
        text = given.get(f"--{name}")
        assert text is not None, name
        if isinstance(value, bool):
            assert text == str(value).lower(), name
        elif isinstance(value, (int, float)):
            assert float(text) == float(value), name
        else:
            assert text == value, name
