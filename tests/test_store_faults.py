"""A store that fails (``base.remote``'s bounds): an S3 endpoint on loopback, started and stopped here,
that answers every request with 500, throttles every one with 503, or never answers. Each command ends
with one line naming the URL (no credential, no traceback) after a bounded number of tries, each
under the connect and read timeouts (``RL_BOARD_STORE_*``)."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import command_process as command

from rl_board.base import remote

pytestmark = pytest.mark.s3
pytest.importorskip("s3fs")

SECRET = "fault-s3cr3t-value-000"
URL = "s3://team/runs/a"


class FaultServer:
    """An HTTP server on 127.0.0.1 whose every answer is ``mode``: "500", "503", or "hang" (the request is
    read and never answered until the server stops). Counts the requests it was sent."""

    def __init__(self, mode: str):
        self.mode, self.requests, self.release = mode, 0, threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                server.requests += 1
                if server.mode == "hang":
                    server.release.wait(600)
                    return
                code, name = (500, "InternalError") if server.mode == "500" else (503, "SlowDown")
                body = f"<?xml version='1.0'?><Error><Code>{name}</Code><Message>x</Message></Error>".encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_HEAD = do_PUT = do_POST = _answer

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(60)


def _env(endpoint: str, home, **limits: str) -> dict:
    """s3fs pointed at ``endpoint`` through the standard variables, with the board's limits ``limits``."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "AKIAFAULTTEST", "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(home / "none"),
            "AWS_SHARED_CREDENTIALS_FILE": str(home / "none"), "AWS_EC2_METADATA_DISABLED": "true", **limits}


def _one_line(done, *words: str) -> str:
    """The one ``error:`` line of a command that failed: exit status 2, the URL named, no secret."""
    err = done.stderr
    assert done.returncode == 2 and "Traceback" not in err and SECRET not in err + done.stdout, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and URL in lines[0], err
    assert any(word in lines[0] for word in words), lines[0]
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "words"), [("500", ("server error",)), ("503", ("throttling",))])
def test_a_failing_store_is_one_line_after_a_bounded_number_of_tries(tmp_path, mode, words):
    """Every request answered 500 (or 503 SlowDown): ``summary`` and ``detect`` each try it 1 + 2 times
    (``RL_BOARD_STORE_RETRIES``' default; s3fs's own 5 rounds of botocore's 5 tries before, 25 requests)
    and print one line naming the URL and how often it was tried."""
    for argv in (("summary", URL, "--no-cache"), ("detect", URL)):
        with FaultServer(mode) as server:
            line = _one_line(command(*argv, env=_env(server.endpoint, tmp_path)), *words)
        assert server.requests == 1 + remote.DEFAULT_RETRIES, (argv, server.requests)
        assert f"tried {1 + remote.DEFAULT_RETRIES} times" in line


@pytest.mark.slow
def test_an_endpoint_that_never_answers_is_one_line_at_the_read_timeout(tmp_path):
    """An endpoint that takes the request and never answers, under a read timeout of 1 s and 1 retry
    (``RL_BOARD_STORE_READ_TIMEOUT``, ``RL_BOARD_STORE_RETRIES``): two requests, then one line naming the
    URL, the timeout and the settings that change it (before: minutes of silence)."""
    limits = {remote.READ_TIMEOUT_ENV: "1", remote.RETRIES_ENV: "1"}
    for argv in (("summary", URL, "--no-cache"), ("detect", URL)):
        with FaultServer("hang") as server:
            line = _one_line(command(*argv, env=_env(server.endpoint, tmp_path, **limits)), "did not answer")
        assert server.requests == 2, (argv, server.requests)
        assert "within 1 s" in line and remote.READ_TIMEOUT_ENV in line


def test_the_limits_come_from_the_environment_else_the_defaults(monkeypatch):
    """``store_limits`` reads the three settings, and a value that is no number of at least 0 is the default."""
    for name in (remote.CONNECT_TIMEOUT_ENV, remote.READ_TIMEOUT_ENV, remote.RETRIES_ENV):
        monkeypatch.delenv(name, raising=False)
    assert remote.store_limits() == (5.0, 10.0, 2)
    monkeypatch.setenv(remote.CONNECT_TIMEOUT_ENV, "0.5")
    monkeypatch.setenv(remote.READ_TIMEOUT_ENV, "-3")
    monkeypatch.setenv(remote.RETRIES_ENV, "0")
    assert remote.store_limits() == (0.5, 10.0, 0)


def test_nothing_listens_on_the_port_after_the_server_stops(tmp_path):
    """The fault server this file starts is gone when its block ends (the test ends what it started)."""
    with FaultServer("500") as server:
        port = server.httpd.server_address[1]
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0
    assert not server.thread.is_alive()
