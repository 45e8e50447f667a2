"""The door comes before any connection: with ``RL_BOARD_ROOTS`` set, a URL outside it (any protocol, a
host, a chained URL) is refused from its text, before an fsspec filesystem is made. A real listener on
loopback records whether anything connected: the CLI, the MCP server and the page's tokenizer box."""

from __future__ import annotations

import contextlib
import io
import socket
import threading

import pytest
from conftest import REPO, sample, write_lines
from page_steps import load as _load
from page_steps import open_page as _open
from streamlit.testing.v1 import AppTest

from rl_board.base.access import OutsideAllowedFolders
from rl_board.base.remote import check_url_text
from rl_board.cli import main
from rl_board.views import keys


class Listener:
    """A TCP listener on loopback that answers like an FTP server's greeting and keeps what it was sent."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.received: list[bytes] = []
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:  # closed
                return
            self.connections += 1
            with conn:
                try:
                    conn.sendall(b"220 ready\r\n")
                    conn.settimeout(2)
                    self.received.append(conn.recv(200))
                except OSError:
                    pass

    def close(self):
        self.server.close()
        self.thread.join(5)


@pytest.fixture
def listener():
    found = Listener()
    yield found
    found.close()


def cli(*argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``rl-board ARGV`` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


def _urls(port: int) -> list[str]:
    return [f"ftp://127.0.0.1:{port}/run", f"zip://x::ftp://127.0.0.1:{port}/run",
            f"simplecache::ftp://127.0.0.1:{port}/run", f"FTP://127.0.0.1:{port}/run"]


@pytest.mark.slow
def test_a_url_outside_the_roots_connects_nowhere_and_is_refused_in_one_line(tmp_path, monkeypatch, listener):
    """RL_BOARD_ROOTS names one local folder: summary of an ftp:// URL, a chained zip::ftp:// and
    simplecache::ftp:// one, --tokenizer ftp://…, and every other command given an ftp:// run (detect, metrics,
    index, tags, cache clear, findings, search, diff, report) each exit 2 with one line on stderr saying it is
    outside the allowed folders, and the listener saw no connection."""
    monkeypatch.setenv("RL_BOARD_ROOTS", str(tmp_path))
    write_lines(tmp_path / "run" / "rollouts.jsonl", [sample(1, 0.5, prompt="p", response="r")])
    for argv in [("summary", url) for url in _urls(listener.port)] + [
            ("summary", str(tmp_path / "run"), "--tokenizer", f"ftp://127.0.0.1:{listener.port}/tok"),
            ("search", str(tmp_path / "run"), "--regex", "x", "--tokenizer", f"ftp://127.0.0.1:{listener.port}/t")] + [
            (*cmd, f"ftp://127.0.0.1:{listener.port}/run", *more) for cmd, more in (
                (("detect",), ()), (("metrics",), ()), (("index",), ()), (("tags",), ()), (("cache", "clear"), ()),
                (("findings",), ()), (("search",), ("--regex", "x")), (("diff",), (str(tmp_path / "run"),)),
                (("report",), ("-o", str(tmp_path / "r.html"))))]:
        status, _, err = cli(*argv)
        assert status == 2, (argv, err)
        assert len(err.strip().splitlines()) == 1 and "outside the allowed folders" in err, (argv, err)
    assert listener.connections == 0 and listener.received == []


def test_each_link_of_a_chained_url_is_checked_against_the_url_roots(monkeypatch):
    """With s3://team/runs allowed: a URL below it passes; another bucket, another protocol naming the same
    path, a chain adding a link, a '..' climbing out and a prefix trick (s3://team/runs-evil) are refused."""
    monkeypatch.setenv("RL_BOARD_ROOTS", "s3://team/runs")
    check_url_text("s3://team/runs/a/b")
    check_url_text("S3A://team/runs/./a")  # s3a names the same filesystem; '.' goes
    for url in ("s3://other/runs/a", "ftp://team/runs/a", "simplecache::s3://team/runs/a",
                "zip://x::s3://team/runs/a.zip", "s3://team/runs/../secrets", "s3://team/runs-evil/a",
                "http://team/runs/a"):
        with pytest.raises(OutsideAllowedFolders):
            check_url_text(url)


@pytest.mark.slow
def test_every_mcp_tool_refuses_a_url_outside_the_roots_without_connecting(tmp_path, listener):
    """The MCP server on a local root: each tool given an ftp:// or chained URL answers a tool error naming the
    allowed folders, the listener saw no connection, and the server still answers ``runs`` after them."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed (requirements-dev.txt pins it)")
    from test_mcp import _session

    write_lines(tmp_path / "run" / "rollouts.jsonl", [sample(1, 0.5, prompt="p", response="r")])
    url, chained = _urls(listener.port)[:2]
    calls = [("summary", {"run": url}), ("findings", {"run": chained}), ("search", {"run": url, "regex": "x"}),
             ("sample", {"run": url, "address": "a.jsonl:0"}), ("metrics", {"path": chained}),
             ("diff", {"run_a": url, "run_b": str(tmp_path / "run")}), ("runs", {})]
    _, results = _session(calls, roots=tmp_path)
    for (name, _), result in zip(calls[:-1], results[:-1]):
        assert result.is_error and "outside the allowed folders" in result.content[0].text, (name, result.content)
    assert not results[-1].is_error
    assert listener.connections == 0


@pytest.mark.slow
def test_the_page_tokenizer_box_refuses_a_url_outside_the_roots_without_connecting(tmp_path, monkeypatch,
                                                                                      listener):
    """On the page, a tokenizer typed as ftp://… (RL_BOARD_ROOTS a local folder): the run still loads, one
    warning says the tokenizer is outside the allowed folders, and the listener saw no connection."""
    monkeypatch.setenv("RL_BOARD_ROOTS", str(tmp_path))
    write_lines(tmp_path / "run" / "rollouts.jsonl", [sample(s, 0.5, prompt="p", response="r") for s in (1, 2)])
    at = _open(tmp_path, "run")
    at.sidebar.text_input(key=keys.TOKENIZER).input(f"ftp://127.0.0.1:{listener.port}/tok").run()
    at = _load(at)
    assert not at.exception
    boxes = [w.value for w in at.warning if w.value.startswith("Can't use this tokenizer")]
    assert len(boxes) == 1 and "outside the allowed folders" in boxes[0]
    assert listener.connections == 0




@pytest.mark.slow
def test_the_page_root_box_refuses_a_url_outside_the_roots_without_connecting(tmp_path, monkeypatch, listener):
    """On the page, ftp://… and zip://x::ftp://… typed as the root (RL_BOARD_ROOTS a local folder): one error
    each, no exception, and the listener saw no connection."""
    monkeypatch.setenv("RL_BOARD_ROOTS", str(tmp_path))
    for url in _urls(listener.port)[:2]:
        at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
        at.sidebar.text_input(key=keys.ROOT).input(url).run()
        assert not at.exception and len(at.error) == 1, url
    assert listener.connections == 0
