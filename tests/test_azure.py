"""Runs in Azure Blob storage, read from a real Azure-compatible server on loopback (Azurite, from the
npm registry; ``./test.sh`` installs it into ``.azurite/``) through adlfs: the same output as the local
folder, and faults as one line naming the URL."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from conftest import REPO, close_to

pytestmark = [pytest.mark.azure, pytest.mark.slow]  # every test starts Azurite
pytest.importorskip("adlfs")

ACCOUNT = "devstoreaccount1"  # Azurite's well-known development account and key (public, not a secret)
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
RUNS = ("ppo_demo", "trl_grpo_demo")


def _azurite() -> str | None:
    local = REPO / ".azurite" / "node_modules" / ".bin" / "azurite-blob"
    return str(local) if local.exists() else shutil.which("azurite-blob")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _connection(port: int, key: str = KEY) -> str:
    return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={key};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{ACCOUNT};")


@pytest.fixture(scope="module")
def azurite(tmp_path_factory):
    """Azurite's blob service on a loopback port, with the bundled runs uploaded to container ``team``."""
    program = _azurite()
    if program is None:
        pytest.skip("Azurite is not installed (./test.sh installs it: npm install --prefix .azurite azurite)")
    port = _free_port()
    folder = tmp_path_factory.mktemp("azurite")
    proc = subprocess.Popen([program, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(folder),
                             "--silent", "--skipApiVersionCheck"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.time() + 60
        while time.time() < end:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        import adlfs

        fs = adlfs.AzureBlobFileSystem(connection_string=_connection(port), skip_instance_cache=True)
        fs.mkdir("team")
        for run in RUNS:
            local = REPO / "rollout_samples" / run
            for path in local.rglob("*"):
                if path.is_file():
                    fs.pipe(f"team/runs/{run}/{path.relative_to(local).as_posix()}", path.read_bytes())
        yield port
    finally:
        proc.kill()  # Azurite waits on open connections after SIGTERM
        proc.wait(timeout=30)


def command(*argv: str, connection: str) -> subprocess.CompletedProcess:
    """``rl-board ARGV`` as its own process, the connection string in the environment adlfs reads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AZURE_")}
    env["AZURE_STORAGE_CONNECTION_STRING"] = connection
    return subprocess.run([sys.executable, "-m", "rl_board", *argv], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=300)


@pytest.mark.parametrize("run", RUNS)
def test_an_azure_run_prints_what_the_local_folder_prints(azurite, run):
    """summary, search and findings of a bundled run read from Azurite (az://) equal the local folder's."""
    for argv in (("summary", "--json"), ("search", "--regex", "the", "--json"), ("findings", "--json")):
        local = command(argv[0], str(REPO / "rollout_samples" / run), *argv[1:], connection="")
        remote = command(argv[0], f"az://team/runs/{run}", *argv[1:], connection=_connection(azurite))
        assert local.returncode == remote.returncode == 0, remote.stderr
        assert close_to(json.loads(remote.stdout), json.loads(local.stdout)), argv


def test_azure_faults_are_one_line(azurite):
    """A wrong account key and a container that does not exist: one line naming the URL each, no key shown."""
    wrong = "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXk="
    cases = ((f"az://team/runs/{RUNS[0]}", _connection(azurite, wrong), ("credentials were refused", "access denied")),
             ("az://no-such-container/runs/a", _connection(azurite), ("not found", "no such")))
    for url, connection, words in cases:
        result = command("summary", url, connection=connection)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
        assert url in lines[0] and any(w in lines[0] for w in words), lines[0]
        assert wrong not in result.stderr and KEY not in result.stderr
