"""Images in rollouts: what an image is and its size from its header alone (base.images), each sample's
image count, and run.images giving back the bytes the writer was fed, at their place; hostile images (a
PNG bomb, an SVG with a script, a path out of the run, an http URL) cost nothing and run nothing."""

import base64
import io
import struct
import sys
import zlib
from pathlib import Path

import pytest
from PIL import Image

from rl_board.base import images as I

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agent_writers import (  # noqa: E402
    v1_window_message,
    v1_window_node,
    v1_window_task,
    v1_window_trace,
    write_prime_rl_window,
)


def encoded(size: tuple[int, int], fmt: str, color=(200, 30, 60)) -> bytes:
    """An image of ``size`` in ``fmt`` as Pillow writes it."""
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, fmt)
    return out.getvalue()


def data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def png_bomb(width: int = 50_000, height: int = 50_000) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` (8-bit grey), its IDAT a zlib stream of zeros cut
    short: decoded whole it would take width x height bytes, the file is a few kilobytes."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    packer = zlib.compressobj()
    idat = packer.compress(b"\0" * (1 << 20)) + packer.flush()
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script></svg>'


@pytest.mark.parametrize(("fmt", "mime", "size"), [("PNG", "image/png", (31, 17)), ("JPEG", "image/jpeg", (64, 48)),
                                                   ("WEBP", "image/webp", (40, 9)), ("GIF", "image/gif", (5, 300))])
def test_sniff_and_dimensions_read_the_header(fmt, mime, size):
    """Each of PNG, JPEG, WebP and GIF is known by its magic bytes and its size read from its header."""
    data = encoded(size, fmt)
    assert I.sniff(data) == mime
    assert I.dimensions(data) == size


def test_webp_lossless_and_extended_headers():
    """A lossless WebP (VP8L) and one with alpha (VP8X) give their sizes too."""
    out = io.BytesIO()
    Image.new("RGB", (123, 45)).save(out, "WEBP", lossless=True)
    assert I.dimensions(out.getvalue()) == (123, 45)
    out = io.BytesIO()
    Image.new("RGBA", (77, 3), (1, 2, 3, 100)).save(out, "WEBP")
    assert I.dimensions(out.getvalue()) == (77, 3)


def test_svg_and_text_are_not_images():
    """An SVG (with a script) and plain bytes are no image: no mime, no size, no thumbnail."""
    for data in (SVG, b"hello", b""):
        assert I.sniff(data) is None
        assert I.dimensions(data) is None
        assert I.thumbnail(data, 64) is None


def test_png_bomb_is_refused_from_its_header():
    """A PNG claiming 50,000 x 50,000 pixels is named by its header and never decoded."""
    bomb = png_bomb()
    assert len(bomb) < 10_000
    mime, size, note = I.check(bomb)
    assert (mime, size) == ("image/png", (50_000, 50_000))
    assert "50000 x 50000" in note and "RL_BOARD_MAX_IMAGE_PIXELS" in note
    assert I.thumbnail(bomb, 64) is None


def test_thumbnail_is_a_small_png_of_the_same_picture():
    """A thumbnail is a PNG within the box, aspect kept, of the same colour as the image."""
    small = I.thumbnail(encoded((200, 100), "PNG", (10, 200, 30)), 64)
    assert I.sniff(small) == "image/png" and I.dimensions(small) == (64, 32)
    assert Image.open(io.BytesIO(small)).convert("RGB").getpixel((10, 10)) == (10, 200, 30)


def test_data_url_decodes_within_its_bound():
    """A data URL gives its declared mime and bytes; past the byte bound or malformed, nothing."""
    data = encoded((8, 8), "PNG")
    url = data_url(data, "image/png")
    assert I.decode_data_url(url) == ("image/png", data)
    assert I.decode_data_url(url, max_bytes=len(data) - 10) is None
    assert I.decode_data_url("data:image/png;base64,@@@") is None
    assert I.decode_data_url("https://example.com/a.png") is None
    assert I.data_url_head(url)[:8] == data[:8]


SHOT = encoded((64, 48), "JPEG", (0, 90, 180))  # the screenshot a tool returned
DIAGRAM = encoded((30, 20), "PNG", (255, 0, 0))  # the picture the user asked about
WEB = "https://example.com/cat.png"


def image_message(role: str, parts: list[dict], **kwargs) -> dict:
    return v1_window_message(role, parts, **kwargs)


def image_run(out: Path) -> Path:
    """A prime-rl run (June-July 2026 layout, verifiers v1 traces) whose first trace has a picture in the user
    turn, a screenshot and an http URL in a tool turn, an SVG with a script, a path out of the run and a bomb;
    the second has none. A real picture lies beside the run folder, where its path points."""
    out.mkdir(parents=True)
    (out.parent / "outside.png").write_bytes(DIAGRAM)
    call = {"id": "c0", "name": "screenshot", "arguments": "{}"}
    task = v1_window_task(0, "What colour?")
    nodes = [
        v1_window_node(image_message("user", [{"type": "text", "text": "What colour is this?"},
                                              {"type": "image_url", "image_url": {"url": data_url(DIAGRAM, "image/png")}}]),
                       None, [1, 2], [False, False], []),
        v1_window_node(v1_window_message("assistant", "", tool_calls=[call]), 0, [3], [True], [-0.5], sampled=True,
                       finish_reason="tool_calls"),
        v1_window_node(image_message("tool", [{"type": "image_url", "image_url": {"url": data_url(SHOT, "image/jpeg")}},
                                             {"type": "text", "text": "the screen"},
                                             {"type": "image_url", "image_url": {"url": WEB}}],
                                     tool_call_id="c0", name="screenshot"), 1, [4], [False], []),
        v1_window_node(image_message("user", [{"type": "image_url", "image_url": {"url": data_url(SVG, "image/svg+xml")}},
                                              {"type": "image_url", "image_url": {"url": "../outside.png"}},
                                              {"type": "image_url", "image_url": {"url": data_url(png_bomb(), "image/png")}}]),
                       2, [5], [False], []),
        v1_window_node(v1_window_message("assistant", "Red."), 3, [6], [True], [-0.1], sampled=True, finish_reason="stop"),
    ]
    plain = [v1_window_node(v1_window_message("user", "Hi"), None, [1], [False], []),
             v1_window_node(v1_window_message("assistant", "Hello"), 0, [2], [True], [-0.2], sampled=True,
                            finish_reason="stop")]
    write_prime_rl_window(out, 0, "train_rollouts.jsonl", [
        v1_window_trace("t0", task, nodes, {"correct": 1.0}, {}, start=0.0),
        v1_window_trace("t1", task, plain, {"correct": 0.0}, {}, start=0.0)])
    return out


@pytest.fixture
def run(tmp_path):
    import rl_board

    return rl_board.load(image_run(tmp_path / "vlm"))


def test_count_per_sample(run):
    """A sample's image count is its image parts with bytes, a URL or a path: 6 in the first, 0 in the second."""
    frame = run.to_pandas()
    assert frame["images"].tolist() == [6, 0]


def test_images_give_back_the_bytes_at_their_place(run):
    """run.images gives each image's bytes as fed to the writer, its mime, size and turn; a URL and the
    hostile ones keep their place with a note and no bytes."""
    got = run.images(run.to_pandas().index[0])
    assert [g["message_index"] for g in got] == [0, 2, 2, 3, 3, 3]
    assert got[0]["data"] == DIAGRAM and (got[0]["mime"], got[0]["width"], got[0]["height"]) == ("image/png", 30, 20)
    assert got[1]["data"] == SHOT and (got[1]["mime"], got[1]["width"], got[1]["height"]) == ("image/jpeg", 64, 48)
    assert got[1]["size"] == len(SHOT)
    assert got[2]["data"] is None and got[2]["url"] == WEB and "never fetched" in got[2]["note"]
    assert got[3]["data"] is None and got[3]["mime"] is None and "never SVG" in got[3]["note"]
    assert got[4]["data"] is None and "outside the run's folder" in got[4]["note"]
    assert got[5]["data"] is None and (got[5]["width"], got[5]["height"]) == (50_000, 50_000)
    assert "RL_BOARD_MAX_IMAGE_PIXELS" in got[5]["note"]


def test_image_marker_sits_where_the_part_was(run):
    """Each image's ``at`` points at its ``[image]`` in the turn's content, after the text before it."""
    record = run.record_parts(run.to_pandas().index[0])[0]
    got = run.images(run.to_pandas().index[0])
    for image in got:
        content = record["messages"][image["message_index"]]["content"]
        assert content[image["at"]:image["at"] + 7] == "[image]"
    assert record["messages"][2]["content"] == "[image]\nthe screen\n[image]"


def test_sample_bound_bites_and_says_so(run, monkeypatch):
    """Past the bytes per sample, the next image keeps its place and its note names the bound."""
    monkeypatch.setenv("RL_BOARD_MAX_SAMPLE_IMAGES_MB", str((len(DIAGRAM) + 10) / (1 << 20)))
    got = run.images(run.to_pandas().index[0])
    assert got[0]["data"] == DIAGRAM
    assert got[1]["data"] is None and "RL_BOARD_MAX_SAMPLE_IMAGES_MB" in got[1]["note"]


def test_content_pieces_put_images_between_their_texts():
    """The content is cut at each [image] marker, the marker and its joining newline left out."""
    from rl_board.analysis.transcript import content_pieces

    assert content_pieces("look\n[image]\nand\n[image]", [5, 17]) == ("look", "and", "")
    assert content_pieces("[image]", [0]) == ("", "")
    assert content_pieces("cut sho", [50]) == ("cut sho", "")


def test_page_draws_each_image_in_its_turn(tmp_path):
    """The turn view opens the image run: the two pictures drawn (thumbnails), each with its size, the
    URL as text, the hostile ones named and not drawn, the text around them kept."""
    from page_steps import load, open_page

    image_run(tmp_path / "vlm")
    at = load(open_page(tmp_path, "vlm"))
    assert not at.exception, at.exception
    captions = [c.value.replace("\\", "") for c in at.caption]  # Markdown's escapes taken off
    codes = [c.value for c in at.code]
    assert WEB in codes and "What colour is this?" in codes and "the screen" in codes
    assert "[image]" not in " ".join(codes)
    assert len(at.get("image")) == 4  # each thumbnail, then its whole
    assert f"image/png · 30 × 20 · {len(DIAGRAM):,} bytes" in captions
    assert f"image/jpeg · 64 × 48 · {len(SHOT):,} bytes" in captions
    assert any("6 images" in c for c in captions)
    assert any("never SVG" in c for c in captions)
    assert any("outside the run's folder" in c for c in captions)
    assert any("50000 x 50000" in c for c in captions)


def test_search_has_images_lists_only_samples_with_images(tmp_path):
    """rl-board search --has-images lists the one trace with images (line 1 of its file), not the other."""
    import json
    import subprocess

    image_run(tmp_path / "vlm")
    proc = subprocess.run([sys.executable, "-m", "rl_board", "search", str(tmp_path / "vlm"), "--has-images",
                           "--json", "--no-cache"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert [(s["file"], s["line"]) for s in got["samples"]] == [("rollouts/step_0/train_rollouts.jsonl", 1)]


def test_batch_table_and_sort_offer_images_only_where_there_are(run):
    """The batch table has an images column and the sort an images choice on a run with images; a run
    without any has neither."""
    from rl_board.analysis.tables import build_batch_table, sort_choices, sort_samples

    assert "images" in sort_choices(run.extras, run.samples)
    ordered = sort_samples(run.with_text(run.samples), "images", descending=False)
    assert build_batch_table(ordered)["images"].tolist() == [0, 6]
    plain = run.samples.assign(images=0)
    assert "images" not in sort_choices(run.extras, plain) and "images" not in build_batch_table(
        run.with_text(plain))


@pytest.mark.slow
def test_mcp_sample_gives_the_images_as_image_content(tmp_path):
    """The MCP search tool finds the sample with images; its sample tool lists every image in its JSON and
    attaches the two with bytes as PNG pictures of the same size (both within the side bound) and colour as
    the images fed to the writer."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed (requirements-dev.txt pins it)")
    from test_mcp import _session

    image_run(tmp_path / "vlm")
    _, (found, got) = _session([("search", {"run": str(tmp_path / "vlm"), "has_images": True}),
                                ("sample", {"run": str(tmp_path / "vlm"),
                                            "address": "rollouts/step_0/train_rollouts.jsonl:1", "max_tokens": 1})],
                               roots=tmp_path)
    assert [s["line"] for s in found.structured_content["samples"]] == [1]  # the trace without images left out
    listed = got.structured_content["images"]
    assert [(i["turn"], i["width"], i["height"], i["attached"]) for i in listed] == [
        (0, 30, 20, True), (2, 64, 48, True), (2, None, None, False), (3, None, None, False),
        (3, None, None, False), (3, 50_000, 50_000, False)]
    pictures = [c for c in got.content if c.type == "image"]
    assert [c.mime_type for c in pictures] == ["image/png", "image/png"]
    decoded = [Image.open(io.BytesIO(base64.b64decode(c.data))).convert("RGB") for c in pictures]
    assert [d.size for d in decoded] == [(30, 20), (64, 48)]
    assert decoded[0].getpixel((3, 3)) == (255, 0, 0)
    assert max(abs(a - b) for a, b in zip(decoded[1].getpixel((30, 20)), (0, 90, 180))) <= 3  # JPEG's rounding


# -- W&B: TRL's completions table logged offline (tests/make_wandb_image_fixtures.py) -------------------------

import make_wandb_image_fixtures as wandb_fixture  # noqa: E402

WANDB = next((Path(__file__).resolve().parent / "data" / wandb_fixture.NAME / "wandb").glob("offline-run-*"))


def test_wandb_trl_table_opens_with_its_string_steps_and_summed_reward():
    """TRL's rows (step logged as "1") are read, each with its step and its reward functions' sum."""
    import rl_board

    frame = rl_board.load(WANDB).to_pandas()
    fed = [(step, row[2]) for step, rows in wandb_fixture.IMAGES.items() for row in rows]
    assert list(zip(frame["step"].tolist(), frame["reward"].tolist())) == fed


def test_wandb_images_come_from_the_run_table_artifact():
    """Each row's images, counted and read from the artifact: the sizes and the pixels fed to wandb.Image."""
    import rl_board

    run = rl_board.load(WANDB)
    frame = run.to_pandas()
    fed = [row[4] for rows in wandb_fixture.IMAGES.values() for row in rows]
    assert frame["images"].tolist() == [len(images) for images in fed]
    for sample_id, images in zip(frame.index, fed):
        got = run.images(sample_id)
        assert [(g["width"], g["height"], g["mime"], g["message_index"]) for g in got] == [
            (w, h, "image/png", 0) for w, h, _ in images]
        for g, (w, h, colour) in zip(got, images):  # the size pixel for pixel, all of the colour fed
            pixels = Image.open(io.BytesIO(g["data"])).convert("RGB")
            assert pixels.size == (w, h) and set(pixels.getdata()) == {colour}


def test_wandb_images_without_the_artifact_are_counted_and_say_where_they_are(tmp_path):
    """Without the artifact folder, a row still counts its images; each says the pixels are in the artifact."""
    import shutil

    import rl_board

    copy = tmp_path / "run"
    shutil.copytree(WANDB, copy, ignore=shutil.ignore_patterns("artifacts"))
    run = rl_board.load(copy)
    assert run.to_pandas()["images"].tolist() == [1, 2, 1, 1]
    got = run.images(run.to_pandas().index[1])
    assert [g["data"] for g in got] == [None, None]
    assert all("run_table artifact" in g["note"] for g in got)


def test_report_embeds_thumbnails_within_its_budget(run):
    """The report shows a sample's images with bytes as inline PNGs of their size and colour, says how many
    lack pixels, and names those its byte budget leaves out."""
    import re

    from rl_board.analysis.report import _images_html

    label = run.label_of(run.to_pandas().index[0])
    got = _images_html(run, label, [1 << 20])
    sources = re.findall(r'src="data:image/png;base64,([^"]+)"', got)
    pictures = [Image.open(io.BytesIO(base64.b64decode(s))).convert("RGB") for s in sources]
    assert [p.size for p in pictures] == [(30, 20), (64, 48)] and pictures[0].getpixel((0, 0)) == (255, 0, 0)
    assert "2 of 6 images shown; 4 without pixels here" in got
    tight = _images_html(run, label, [len(base64.b64decode(sources[0]))])
    assert tight.count("<img") == 1 and "1 left out: the report embeds at most" in tight
    assert _images_html(run, run.label_of(run.to_pandas().index[1]), [1 << 20]) == ""


# -- trackio: traces with trackio.Image parts (tests/make_trackio_image_fixtures.py) ---------------------------

import make_trackio_image_fixtures as trackio_fixture  # noqa: E402

TRACKIO = Path(__file__).resolve().parent / "data" / trackio_fixture.NAME


def test_trackio_trace_images_are_read_from_its_media_folder():
    """Each trace's images, at their turn, of the size fed and of its colour (trackio re-encodes a
    trackio.Image as RGBA: the pixels, not the bytes, are compared), an inline data URL's bytes as fed."""
    import rl_board

    run = rl_board.load(TRACKIO)
    frame = run.to_pandas()
    frame = frame[frame.index.map(lambda sid: int(sid.split(":")[1]) < 10**12)]  # the traces' rows
    fed = [[(turn, value, kind) for turn, (_, parts) in enumerate(messages) for kind, value in parts
            if kind != "text"] for traces in trackio_fixture.TRACES.values() for _, messages in traces]
    assert frame["images"].tolist() == [len(images) for images in fed]
    assert frame["reward"].tolist() == [reward for traces in trackio_fixture.TRACES.values() for reward, _ in traces]
    for sample_id, images in zip(frame.index, fed):
        got = run.images(sample_id)
        assert [(g["message_index"], g["width"], g["height"]) for g in got] == [(t, w, h) for t, (w, h, _), _ in images]
        for g, (_, (w, h, colour), kind) in zip(got, images):
            decoded = Image.open(io.BytesIO(g["data"]))
            if kind == "image":
                assert decoded.mode == "RGBA" and set(decoded.getdata()) == {(*colour, 255)}
            else:
                assert g["data"] == trackio_fixture.png((w, h), colour)


def test_a_symlink_out_of_the_run_is_not_followed(tmp_path):
    """An image path naming a link inside the run folder that points out of it is refused, not read."""
    import os

    import rl_board

    out = tmp_path / "linked"
    (tmp_path / "secret.png").write_bytes(DIAGRAM)
    out.mkdir()
    os.symlink(tmp_path / "secret.png", out / "shot.png")
    nodes = [v1_window_node(image_message("user", [{"type": "image_url", "image_url": {"url": "shot.png"}}]),
                            None, [1], [False], []),
             v1_window_node(v1_window_message("assistant", "ok"), 0, [2], [True], [-0.1], sampled=True,
                            finish_reason="stop")]
    write_prime_rl_window(out, 0, "train_rollouts.jsonl",
                          [v1_window_trace("s0", v1_window_task(0, "x"), nodes, {"correct": 1.0}, {}, start=0.0)])
    run = rl_board.load(out)
    (got,) = run.images(run.to_pandas().index[0])
    assert got["data"] is None and "outside the run's folder" in got["note"]


def test_a_cold_read_keeps_no_image_bytes():
    """Turns made outside a re-read keep where an image is, not its base64; within keep_image_data, they do."""
    from rl_board.readers.turns import keep_image_data, turn

    url = data_url(DIAGRAM, "image/png")
    message = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}
    assert turn(message)["images"] == [{"at": 0, "part": 0, "source": "data", "url": None, "data": None}]
    with keep_image_data():
        assert turn(message)["images"][0]["data"] == url


def test_trackio_completions_table_rows_are_samples_with_their_images():
    """TRL's completions table logged to trackio: each row a sample of its step ("3" as 3), reward the
    reward function's column, prompt as fed, and its trackio.Image cells of the size and colour fed."""
    import rl_board

    run = rl_board.load(TRACKIO)
    frame = run.to_pandas(text=True)
    tables = frame[frame.index.map(lambda sid: int(sid.split(":")[1]) > 10**12)]
    fed = [(step, *row) for step, rows in trackio_fixture.COMPLETIONS.items() for row in rows]
    assert tables["step"].tolist() == [f[0] for f in fed]
    assert tables["reward"].tolist() == [f[3] for f in fed]
    assert tables["prompt"].tolist() == [f[1] for f in fed]
    assert tables["images"].tolist() == [len(f[5]) for f in fed]
    for sample_id, f in zip(tables.index, fed):
        got = run.images(sample_id)
        assert [(g["width"], g["height"]) for g in got] == [(w, h) for w, h, _ in f[5]]
        assert [set(Image.open(io.BytesIO(g["data"])).getdata()) for g in got] == [{(*c, 255)} for *_, c in f[5]]


def test_trackio_tables_of_other_things_are_not_samples(tmp_path):
    """A logged table without prompt or completion texts (an experiment's results) adds no sample."""
    import shutil
    import sqlite3

    import rl_board

    copy = tmp_path / "tk"
    shutil.copytree(TRACKIO, copy)
    with sqlite3.connect(copy / "vlm.db") as conn:
        conn.execute("INSERT INTO metrics (run_id, timestamp, run_name, step, metrics) VALUES (?, ?, ?, ?, ?)",
                     ("x", "2026-01-01", "grpo-vlm", 9,
                      '{"results": {"_type": "trackio.table", "_value": [{"model": "CNN", "accuracy": 0.9}]}}'))
    conn.close()
    assert len(rl_board.load(copy).to_pandas()) == len(rl_board.load(TRACKIO).to_pandas()) == 5
