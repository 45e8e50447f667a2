"""Bounds by design: a hostile file costs a bounded read and one clear line, never the machine."""

from __future__ import annotations

import bz2
import json
import os
import socket
import subprocess
import sys

import pytest
import zstandard
from conftest import REPO, write_lines
from ray_writers import verl_dump

from rl_board.base.compression import TooLarge, expansion_limit, read_bytes

_HANG_GUARD = 240  # seconds: a hang guard for the command, never a timed assert

GOOD = b"".join(json.dumps({"step": 1, "reward": k / 10, "prompt": "p", "response": "r"}).encode() + b"\n"
                for k in range(3))


def _summary(run, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rl_board", "summary", "--json", str(run)], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, **env}, timeout=_HANG_GUARD)


def _bz2_bomb(path, gib: int = 20) -> None:
    """Three good lines, then a last line of ``gib`` GiB of ``a``: bz2 streams of 64 MiB each, one
    compressed once and repeated (a reader reads every stream of a file), so building it is cheap."""
    piece = bz2.compress(b"a" * (64 << 20))
    path.write_bytes(bz2.compress(GOOD + b'{"step": 2, "reward": 1, "prompt": "') + piece * (gib * 16))


@pytest.mark.slow
def test_a_bz2_bomb_stops_at_the_bound_and_names_it(tmp_path):
    """A 26 KB .bz2 whose last line expands to 20 GiB ends at the 64 MiB floor with the true reason;
    the lines before it load."""
    (tmp_path / "run").mkdir()
    _bz2_bomb(tmp_path / "run" / "a.jsonl.bz2")
    assert (tmp_path / "run" / "a.jsonl.bz2").stat().st_size < 30_000
    proc = _summary(tmp_path / "run", RL_BOARD_CACHE_DIR=str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["lines_ok"] == 3
    (unreadable,) = got["files_unreadable"]
    assert unreadable["file"] == "a.jsonl.bz2"
    why = unreadable["error"]
    assert why.startswith("expands past 64 MB, more than 1000× its 26 KB") and "RL_BOARD_MAX_RATIO" in why
    assert "Traceback" not in proc.stderr


def test_the_bounds_are_the_users_to_change(tmp_path, monkeypatch):
    """The relative bound follows RL_BOARD_MAX_RATIO above the 64 MiB floor, the absolute one
    RL_BOARD_MAX_EXPANDED_GB; a read past either raises TooLarge naming it."""
    assert expansion_limit(1 << 20)[0] == 1000 << 20
    assert expansion_limit(1000)[0] == 64 << 20
    monkeypatch.setenv("RL_BOARD_MAX_RATIO", "2000")
    assert expansion_limit(1 << 20)[0] == 2000 << 20
    monkeypatch.setenv("RL_BOARD_MAX_EXPANDED_GB", "0.5")
    limit, why = expansion_limit(1 << 20)
    assert limit == 512 << 20 and "512 MB" in why and "RL_BOARD_MAX_EXPANDED_GB" in why
    monkeypatch.delenv("RL_BOARD_MAX_EXPANDED_GB")
    monkeypatch.setenv("RL_BOARD_MAX_RATIO", "1")
    path = tmp_path / "a.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(b"x" * ((64 << 20) + 10)))
    with pytest.raises(TooLarge, match="expands past 64 MB"):
        read_bytes(path)
    path.write_bytes(zstandard.ZstdCompressor().compress(b"x" * (64 << 20)))
    assert len(read_bytes(path)) == 64 << 20  # at the bound exactly: read


def test_a_plain_file_read_whole_past_the_absolute_bound_is_refused_unread(tmp_path, monkeypatch):
    """A sparse 8 GiB file read whole is refused from its size (never read) when over the bound."""
    monkeypatch.setenv("RL_BOARD_MAX_EXPANDED_GB", "1")
    path = tmp_path / "results.json"
    with open(path, "wb") as fh:
        fh.truncate(8 << 30)
    with pytest.raises(TooLarge, match="8.0 GB, more than a file read whole may hold"):
        read_bytes(path)


def _peak_mib(run, **env) -> tuple[subprocess.CompletedProcess, float]:
    """``rl-board summary --json RUN`` and the peak memory (MiB) of it and its workers, measured from
    a parent of its own so no other process of the test counts."""
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(p.returncode)")
    proc = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "rl_board", "summary", "--json",
                           str(run)], capture_output=True, text=True, cwd=REPO, env={**os.environ, **env},
                          timeout=_HANG_GUARD)
    return proc, int(proc.stderr.strip().splitlines()[-1]) / 1024


@pytest.mark.slow
def test_a_million_rejected_lines_are_all_counted_and_the_first_listed(tmp_path):
    """A 2 MB file of one good line and a million bad ones: 1,000,000 rejected, the first 100 listed
    with their line numbers (2 to 101), the rest counted in a note; memory stays under 400 MiB."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "a.jsonl").write_bytes(b'{"step": 1, "reward": 0.5}\n' + b"x\n" * 1_000_000)
    proc, peak = _peak_mib(tmp_path / "run", RL_BOARD_CACHE_DIR=str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert (got["lines_ok"], got["lines_bad"]) == (1, 1_000_000)
    assert [e["line"] for e in got["errors"]] == list(range(2, 102))
    assert peak <= 400, f"{peak:.0f} MiB"


@pytest.mark.slow
def test_the_listed_rejections_follow_the_setting_and_survive_the_cache(tmp_path):
    """RL_BOARD_MAX_ERRORS=3 lists 3 of 10 bad lines and counts 10, read fresh and from the cache."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "a.jsonl").write_bytes(b'{"step": 1, "reward": 0.5}\n' + b"x\n" * 10)
    env = {"RL_BOARD_CACHE_DIR": str(tmp_path / "cache"), "RL_BOARD_MAX_ERRORS": "3"}
    for _ in range(2):
        proc = _summary(tmp_path / "run", **env)
        assert proc.returncode == 0, proc.stderr
        got = json.loads(proc.stdout)
        assert got["lines_bad"] == 10 and [e["line"] for e in got["errors"]] == [2, 3, 4]


@pytest.mark.slow
def test_a_zst_of_junk_lines_is_counted_not_a_memory_error(tmp_path):
    """A 35 KB .zst of 80 Mi junk lines (400 MiB once expanded): read to the 64 MiB bound, every line
    read before it counted (64 MiB of 5-byte lines after the first), no traceback, under 1 GiB."""
    (tmp_path / "run").mkdir()
    first = b'{"step": 1, "reward": 0.5}\n'
    packer = zstandard.ZstdCompressor(level=19).compressobj()
    with open(tmp_path / "run" / "a.jsonl.zst", "wb") as fh:
        fh.write(packer.compress(first))
        for _ in range(80):
            fh.write(packer.compress(b"junk\n" * (1 << 20)))
        fh.write(packer.flush())
    proc, peak = _peak_mib(tmp_path / "run", RL_BOARD_CACHE_DIR=str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["lines_ok"] == 1
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr
    # the bound stops the read after 64 MiB + 1 byte; the 8 MiB blocks before it end on whole lines
    assert got["lines_bad"] >= ((64 << 20) - (8 << 20) - len(first)) // 5
    assert got["files_unreadable"][0]["error"].startswith("expands past 64 MB")
    assert peak <= 1024, f"{peak:.0f} MiB"


def _command(*argv, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rl_board", *map(str, argv)], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, **env}, timeout=_HANG_GUARD)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_among_the_files_is_skipped_not_waited_on(tmp_path):
    """A FIFO named 0.jsonl (sorted first) beside a metrics file and a run's lines: metrics, summary and
    detect end (a FIFO with no writer would block an open forever) and read the regular files."""
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "0.jsonl")
    os.mkfifo(run / "trainer_state.json")
    (run / "train_metrics.jsonl").write_bytes(b'{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.25}\n')
    env = {"RL_BOARD_CACHE_DIR": str(tmp_path / "cache")}
    metrics = _command("metrics", "--json", run, **env)
    assert metrics.returncode == 0, metrics.stderr
    assert json.loads(metrics.stdout)["series"]["loss"] == [[1, 0.5], [2, 0.25]]
    assert _command("summary", run, **env).returncode in (0, 1)  # no run lines: 1, but it ends
    assert _command("detect", run, **env).returncode in (0, 1)


def _special_files(folder, fifo: str, sock: str, monkeypatch) -> None:
    """A FIFO and a socket file (bound, then closed: the file stays) named ``fifo`` and ``sock`` in ``folder``."""
    os.mkfifo(folder / fifo)
    monkeypatch.chdir(folder)  # a socket's path has room for about 100 bytes: bound by its relative name
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(sock)


def _summary_of(run, cache) -> dict:
    done = _summary(run, RL_BOARD_CACHE_DIR=str(cache))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(socket, "AF_UNIX") or not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
@pytest.mark.parametrize("layout", ["jsonl", "verl"])
def test_a_fifo_or_socket_named_like_a_run_file_is_named_in_the_load_report(tmp_path, monkeypatch, layout):
    """A FIFO and a socket named as the format's files (the flat JSONL folder; verl's dump folders, found
    by a glob): summary ends, names each with its kind as not read, and reads the other files as without them."""
    lines = [{"step": 1, "prompt": "p", "response": "a", "reward": 0.5},
             {"step": 2, "prompt": "p", "response": "bb", "reward": 1.0}]
    runs = []
    for name in ("plain", "odd"):
        run = tmp_path / name
        for step, line in enumerate(lines, 1):
            if layout == "jsonl":
                write_lines(run / f"{step}.jsonl", [line])
            else:  # verl's own writer, into the experiment folder's rollout_data/
                verl_dump(run / "rollout_data", step, ["p"], [line["response"]], ["gt"], [line["reward"]], {})
                verl_dump(run / "val_data", step, ["p"], ["v"], ["gt"], [0.0], {})
        runs.append(run)
    prefix = "" if layout == "jsonl" else "rollout_data/"
    _special_files(runs[1] / prefix, "3.jsonl", "4.jsonl", monkeypatch)
    plain, odd = _summary_of(runs[0], tmp_path / "c1"), _summary_of(runs[1], tmp_path / "c2")
    assert odd.pop("files_unreadable") == [
        {"file": f"{prefix}3.jsonl", "error": "a FIFO, not a regular file: not read"},
        {"file": f"{prefix}4.jsonl", "error": "a socket, not a regular file: not read"}]
    assert plain.pop("files_unreadable") == []
    assert odd == plain and plain["files"] == 2 and plain["lines_ok"] == 2
    text = _command("summary", runs[1], RL_BOARD_CACHE_DIR=str(tmp_path / "c3")).stdout
    assert f"  {prefix}3.jsonl: a FIFO, not a regular file: not read\n" in text


def test_opening_a_fifo_or_device_names_it(tmp_path):
    """``open_regular`` refuses a FIFO and a character device with one line naming what it is."""
    from rl_board.base.location import NotRegular, open_regular

    os.mkfifo(tmp_path / "t_1_abc.table.json")
    with pytest.raises(NotRegular, match="t_1_abc.table.json is a FIFO, not a regular file"):
        open_regular(tmp_path / "t_1_abc.table.json")
    with pytest.raises(NotRegular, match="null is a character device"):
        read_bytes("/dev/null")


def test_a_huge_line_in_a_metrics_file_is_skipped_not_a_memory_error(tmp_path):
    """A metrics line longer than the line limit (RL_BOARD_MAX_LINE_MB=1, a 3 MB line) is counted as a
    skipped record; the lines around it are read."""
    (tmp_path / "metrics.jsonl").write_bytes(b'{"step": 1, "loss": 0.5}\n{"step": 2, "loss": [' + b"1," * (3 << 19)
                                             + b'1]}\n{"step": 3, "loss": 0.25}\n')
    proc = _command("metrics", tmp_path / "metrics.jsonl", RL_BOARD_MAX_LINE_MB="1")
    assert proc.returncode == 0, proc.stderr
    assert "1 records skipped" in proc.stdout and "Traceback" not in proc.stderr
    from rl_board.scalars import jsonl

    os.environ["RL_BOARD_MAX_LINE_MB"] = "1"
    try:
        got = jsonl.read(tmp_path / "metrics.jsonl")
    finally:
        del os.environ["RL_BOARD_MAX_LINE_MB"]
    assert got.series["loss"] == [(1, 0.5), (3, 0.25)] and got.skipped == 1


def test_a_sparse_8_gib_results_json_is_looked_at_not_read_whole(tmp_path):
    """detect on a folder no reader claims, holding an 8 GiB (sparse) results.json, looks at its
    first MB only: it ends, its peak memory far below the file's size."""
    run = tmp_path / "run"
    run.mkdir()
    with open(run / "results.json", "wb") as fh:
        fh.write(b'{"a": 1}')
        fh.truncate(8 << 30)
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    proc = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "rl_board", "detect", str(run)],
                          capture_output=True, text=True, cwd=REPO, timeout=_HANG_GUARD)
    assert int(proc.stdout.split()[-1]) / 1024 < 1024  # MiB; reading it whole would take 8192


def _event_file(folder) -> tuple:
    """An event file of 5 steps, each a text sample and a scalar (one event each), and the byte offset of
    each record (walked by its length fields: 8-byte length, 4-byte CRC, data, 4-byte CRC)."""
    import struct

    from ray_writers import TextSummaryWriter

    writer = TextSummaryWriter(folder)
    for step in range(1, 6):
        writer.add_text("samples", f"Sample:\\nanswer {step}\\n\\nReward: {step / 10}", step)
        writer.add_scalar("loss", step / 100, step)
    writer.close()
    (path,) = folder.glob("events.out.tfevents.*")
    data, offsets, at = path.read_bytes(), [], 0
    while at < len(data):
        offsets.append(at)
        at += 16 + struct.unpack("<Q", data[at:at + 8])[0]
    return path, offsets


def _flip(path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_tensorboard_record_failing_its_crc_is_named_and_the_rest_read(tmp_path):
    """One flipped byte in the second text's record: that sample is named lost (1 record) and the other
    four texts and all five scalars are read (TensorBoard's reader stopped there, silently)."""
    from rl_board.readers.formats import tensorboard_text
    from rl_board.scalars import tensorboard

    path, offsets = _event_file(tmp_path / "run")
    # records: the file version event, then per step a text event and a scalar event
    text_two = offsets[3]
    _flip(path, text_two + 20)  # inside its data
    rows, errors, count = tensorboard_text.read_table(path)
    assert rows.column("step").to_pylist() == [1, 3, 4, 5]
    assert [why for _, why in errors] == [f"the record at byte {text_two:,} fails its CRC check: 1 record lost"]
    scalars = tensorboard.read(tmp_path / "run")
    assert [step for step, _ in scalars.series["loss"]] == [1, 2, 3, 4, 5]
    assert scalars.skipped == 1 and "fails its CRC check" in scalars.notes[0]


def test_a_tensorboard_length_failing_its_crc_is_searched_past(tmp_path):
    """A flipped byte in the second text's length field: the bytes up to the next whole record are
    named skipped, and reading goes on there (texts 1, 3, 4, 5)."""
    from rl_board.readers.formats import tensorboard_text

    path, offsets = _event_file(tmp_path / "run")
    _flip(path, offsets[3] + 1)
    rows, errors, _ = tensorboard_text.read_table(path)
    assert rows.column("step").to_pylist() == [1, 3, 4, 5]
    assert [why for _, why in errors] == [f"the record at byte {offsets[3]:,} has a length that fails its CRC "
                                          f"check: bytes {offsets[3]:,}-{offsets[4]:,} skipped (at least one "
                                          "record lost)"]


@pytest.mark.slow
def test_a_wandb_table_of_100000_columns_is_capped_before_the_work(tmp_path):
    """A 1.3 MB W&B table of 10^5 numeric columns: read in one pass (it took minutes, quadratic in
    the columns), the first 256 extra fields kept as columns, the other 99,744 counted as dropped."""
    from rl_board.base import fields as F
    from rl_board.readers.extras import FieldNotes
    from rl_board.readers.formats import wandb_tables

    table = tmp_path / "run" / "files" / "media" / "table"
    table.mkdir(parents=True)
    columns = ["prompt", "response", "reward"] + [f"c{i}" for i in range(100_000)]
    path = table / "samples_1_0123456789abcdef0123.table.json"
    path.write_text(json.dumps({"columns": columns, "data": [["p", "r", 0.5] + [1] * 100_000]}))
    rows, errors, count = wandb_tables.read_table(path)
    extras = F.extra_columns(rows.column_names)
    assert (rows.num_rows, errors, count) == (1, [], 1)
    assert sorted(extras) == sorted(F.extra_column(f"c{i}") for i in range(256))  # the first 256 met
    assert FieldNotes.of(rows).dropped_count == 100_000 - 256
    proc = _summary(tmp_path / "run", RL_BOARD_CACHE_DIR=str(tmp_path / "cache"))
    assert proc.returncode == 0 and json.loads(proc.stdout)["lines_ok"] == 1, proc.stderr


@pytest.mark.slow
def test_twenty_thousand_keys_of_one_line_each_cost_what_their_bytes_cost(tmp_path):
    """20,000 lines each with its own extra key: 256 become columns, the 19,744 others are named in one
    note, and the read stays under 1 GiB (Arrow's reader, which makes a dense column per key of a block,
    took 5.6 GB for them)."""
    run = tmp_path / "run"
    run.mkdir()
    write_lines(run / "rollout_data_rank0.jsonl",
                [{"step": k // 100, "prompt": f"p{k % 50}", "response": "r", "reward": 1.0, f"k{k}": k}
                 for k in range(20_000)])
    proc, peak = _peak_mib(run, RL_BOARD_CACHE_DIR=str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["lines_ok"] == 20_000 and sum(s["samples"] for s in got["steps"]) == 20_000
    assert sum("19,744 more field name(s)" in line for line in proc.stderr.splitlines()) == 1
    assert peak < 1024, f"{peak:.0f} MiB"


def _declaring_event_file(folder, values: int):
    """An event file of 3 steps, each a text sample and a ``scalars`` plugin tensor (as ``tf.summary.scalar``
    writes it), step 2's two tensors each one value declared as ``values`` by their shape."""
    from ray_writers import TextSummaryWriter
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto

    writer = TextSummaryWriter(folder)
    scalars = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    for step in (1, 2, 3):
        dims = [TensorShapeProto.Dim(size=values)] if step == 2 else []
        writer.add_text("samples", f"Sample:\\nanswer {step}\\n\\nReward: {step / 10}", step)
        if step == 2:  # the text tensor again, its one value declared as many
            text = Summary.Value(tag="samples/text_summary", metadata=SummaryMetadata(
                plugin_data=SummaryMetadata.PluginData(plugin_name="text")), tensor=TensorProto(
                dtype="DT_STRING", string_val=[b"x"], tensor_shape=TensorShapeProto(dim=dims)))
            writer._add(text, step)
        tensor = TensorProto(dtype="DT_FLOAT", float_val=[step / 100], tensor_shape=TensorShapeProto(dim=dims))
        writer._add(Summary.Value(tag="loss", metadata=scalars, tensor=tensor), step)
    writer.close()


def test_tensorboard_tensors_declaring_a_huge_shape_are_named_not_made(tmp_path):
    """A text tensor and a scalar tensor each declaring 10^10 values for the one they hold: neither is made
    (TensorBoard fills the shape: 5.9 GB and 2.1 GB before), each named in one line with its tag and step;
    the other steps' texts and scalars load; the whole summary stays under 1 GiB."""
    from rl_board.base.tfrecords import MAX_TENSOR_VALUES
    from rl_board.readers.formats import tensorboard_text
    from rl_board.scalars import tensorboard

    _declaring_event_file(tmp_path / "run", 10**10)
    (path,) = (tmp_path / "run").glob("events.out.tfevents.*")
    assert path.stat().st_size < 2000
    rows, errors, count = tensorboard_text.read_table(path)
    assert rows.column("step").to_pylist() == [1, 2, 3] and count == 3  # step 2's add_text, not the huge one
    assert [why for _, why in errors] == [f"the tensor of tag 'samples/text_summary' at step 2 declares "
                                          f"10,000,000,000 values (at most {MAX_TENSOR_VALUES:,} are read): "
                                          "1 value not read"]
    scalars = tensorboard.read(tmp_path / "run")
    assert scalars.series["loss"] == [(1, 0.009999999776482582), (3, 0.029999999329447746)]  # float32 of 1/100, 3/100
    assert any("'loss' at step 2 declares 10,000,000,000 values (exactly 1 are read)" in note
               for note in scalars.notes)
    proc, peak = _peak_mib(tmp_path / "run", RL_BOARD_CACHE_DIR=str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr
    assert peak < 1024, f"{peak:.0f} MiB"


def test_a_tensor_declaring_two_values_for_a_scalar_is_named(tmp_path):
    """A scalars-plugin tensor of shape [2] (one value stored, TensorBoard fills both) is no scalar: left
    out and named, where it was dropped silently."""
    from rl_board.scalars import tensorboard

    _declaring_event_file(tmp_path / "run", 2)
    scalars = tensorboard.read(tmp_path / "run")
    assert [step for step, _ in scalars.series["loss"]] == [1, 3]
    assert any("'loss' at step 2 declares 2 values (exactly 1 are read): 1 value not read" in note
               for note in scalars.notes)


def _metrics(path, **env) -> subprocess.CompletedProcess:
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(p.returncode)")
    return subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "rl_board", "metrics", str(path)],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, **env}, timeout=_HANG_GUARD)


def test_a_trainer_state_nested_100000_deep_is_one_line(tmp_path):
    """A trainer_state.json whose log_history is 100,000 nested lists: `rl-board metrics` says in one line
    that it is nested too deeply (it ended in a RecursionError traceback)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "trainer_state.json").write_text('{"log_history": ' + "[" * 100_000 + "]" * 100_000 + "}")
    proc = _metrics(run / "trainer_state.json")
    said = proc.stderr.strip().splitlines()[:-1]  # the last line is the probe's
    assert proc.returncode == 2 and said == [f"error: {run / 'trainer_state.json'} is nested more deeply than "
                                             "Python's json reads: not read."]


def test_a_3_gib_trainer_state_is_refused_by_the_line_limit_unread(tmp_path):
    """A (sparse) 3 GiB trainer_state.json is one JSON value past the 64 MiB line limit: named in one
    line from its size, never read (it was read whole: 3.2 GB, then a MemoryError)."""
    path = tmp_path / "run" / "trainer_state.json"
    path.parent.mkdir()
    with open(path, "wb") as fh:
        fh.write(b'{"log_history": [')
        fh.truncate(3 << 30)
    proc = _metrics(path)
    said = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and said[:-1] == [
        f"error: {path}: trainer_state.json is 3.0 GB, more than the line limit (64 MB; set RL_BOARD_MAX_LINE_MB): "
        "one JSON value, not read."]
    assert int(said[-1]) / 1024 < 1024  # MiB


def test_the_line_limit_on_a_trainer_state_follows_the_setting(tmp_path, monkeypatch):
    """RL_BOARD_MAX_LINE_MB=1: a 2 MB trainer_state.json is refused, a 0.2 MB one read whole (its 5,000
    steps); gzipped, the 2 MB one stops once 1 MiB has come out."""
    import gzip

    from rl_board.base.compression import TooLarge
    from rl_board.scalars import ScalarsError, trl

    monkeypatch.setenv("RL_BOARD_MAX_LINE_MB", "1")

    def state(steps):
        return json.dumps({"log_history": [{"step": s, "loss": s / 8} for s in range(1, steps + 1)]}).encode()

    small, large = state(5_000), state(70_000)
    assert len(small) < 1 << 19 and len(large) > 2 << 20
    (tmp_path / "small").mkdir()
    (tmp_path / "large").mkdir()
    (tmp_path / "small" / "trainer_state.json").write_bytes(small)
    (tmp_path / "large" / "trainer_state.json").write_bytes(large)
    got = trl.read(tmp_path / "small" / "trainer_state.json")
    assert got.series["loss"][-1] == (5_000, 625.0) and len(got.series["loss"]) == 5_000
    with pytest.raises(ScalarsError, match=r"is 2\.\d MB, more than the line limit \(1\.0 MB"):
        trl.read(tmp_path / "large" / "trainer_state.json")
    (tmp_path / "large" / "state.json.gz").write_bytes(gzip.compress(large))
    with pytest.raises(TooLarge, match=r"state.json.gz expands past that, more than the line limit \(1\.0 MB"):
        read_bytes(tmp_path / "large" / "state.json.gz", line=True)
    assert read_bytes(tmp_path / "large" / "state.json.gz") == large  # not one value: the expansion bounds only
