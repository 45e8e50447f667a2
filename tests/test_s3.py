"""Runs in S3, read from a real S3-compatible server on loopback (moto's server, started here, with
authentication on): the same output as the local folder, credentials from the environment never
shown or kept, and each fault one line naming the URL."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, close_to, command, sample, write_lines

pytestmark = [pytest.mark.s3, pytest.mark.slow]  # every test starts moto's server
boto3 = pytest.importorskip("boto3")
pytest.importorskip("s3fs")
pytest.importorskip("moto")

from rl_board.analysis.source import RunSource  # noqa: E402
from rl_board.base.remote import LocationError  # noqa: E402
from rl_board.store import ingest, ranges, workers  # noqa: E402

BUCKET = "team"
RUNS = ("ppo_demo", "trl_grpo_demo", "prime_rl_tokens_demo")
SECRET_MARK = "s3cr3t"  # every secret key made here holds it: a test greps outputs for the key itself


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for(port: int, seconds: float = 30) -> None:
    end = time.time() + seconds
    while time.time() < end:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"moto's server did not start on port {port}")


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """moto's S3 server on a loopback port, authentication enforced after the 4 calls that make an admin
    user; the bundled runs uploaded; a second user with no permission. Yields the endpoint and keys."""
    port = _free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log,
                            stderr=subprocess.STDOUT, env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "4"})
    try:
        _wait_for(port)
        endpoint = f"http://127.0.0.1:{port}"
        anyone = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
        iam = boto3.client("iam", **anyone)
        iam.create_user(UserName="admin")
        key = iam.create_access_key(UserName="admin")["AccessKey"]
        policy = iam.create_policy(PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        iam.attach_user_policy(UserName="admin", PolicyArn=policy["Policy"]["Arn"])
        admin = dict(anyone, aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
        other = boto3.client("iam", **admin)
        other.create_user(UserName="nobody")
        nobody = other.create_access_key(UserName="nobody")["AccessKey"]
        s3 = boto3.client("s3", **admin)
        s3.create_bucket(Bucket=BUCKET)
        for run in RUNS:
            folder = REPO / "rollout_samples" / run
            for path in folder.rglob("*"):
                if path.is_file():
                    s3.put_object(Bucket=BUCKET, Key=f"runs/{run}/{path.relative_to(folder).as_posix()}",
                                  Body=path.read_bytes())
        yield {"endpoint": endpoint, "admin": (key["AccessKeyId"], key["SecretAccessKey"]),
               "nobody": (nobody["AccessKeyId"], nobody["SecretAccessKey"]), "s3": s3}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def _env(monkeypatch, endpoint: str, keys: tuple[str, str], home: Path) -> dict:
    """Point s3fs at ``endpoint`` with ``keys`` through the standard environment variables only."""
    values = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": keys[0], "AWS_SECRET_ACCESS_KEY": keys[1],
              "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(home / "none"),
              "AWS_SHARED_CREDENTIALS_FILE": str(home / "none"), "AWS_MAX_ATTEMPTS": "2",
              "AWS_RETRY_MODE": "standard", "AWS_EC2_METADATA_DISABLED": "true"}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()  # a filesystem made under other keys is not reused
    return values


@pytest.fixture
def as_admin(server, monkeypatch, tmp_path):
    return _env(monkeypatch, server["endpoint"], server["admin"], tmp_path)


@pytest.mark.parametrize("run", RUNS)
def test_an_s3_run_prints_what_the_local_folder_prints(as_admin, run, isolated_cache):
    """summary, search and findings of a bundled run read from the S3 server equal those of the local
    folder (numbers to 1e-12 relative), and the secret key is in no output and no cache file."""
    for argv in (("summary", "--json"), ("search", "--regex", "the", "--json"), ("findings", "--json")):
        local = command(argv[0], str(REPO / "rollout_samples" / run), *argv[1:])
        remote = command(argv[0], f"s3://{BUCKET}/runs/{run}", *argv[1:])
        assert local.returncode == remote.returncode == 0, remote.stderr
        assert close_to(json.loads(remote.stdout), json.loads(local.stdout)), argv
        assert as_admin["AWS_SECRET_ACCESS_KEY"] not in remote.stdout + remote.stderr
    for path in isolated_cache.rglob("*"):
        if path.is_file():
            assert as_admin["AWS_SECRET_ACCESS_KEY"].encode() not in path.read_bytes(), path


def test_worker_processes_read_their_ranges_from_s3(as_admin, server, tmp_path, monkeypatch):
    """A run cut into many ranges is parsed by worker processes, each reading its byte range from the
    server, into the rows the local folder gives."""
    lines = [sample(i % 6, float(i), prompt=f"p{i}", logprobs=[-1.0, -0.25]) for i in range(500)] + ["{bad"]
    write_lines(tmp_path / "big" / "rank0.jsonl", lines)
    server["s3"].put_object(Bucket=BUCKET, Key="runs/big/rank0.jsonl", Body=(tmp_path / "big/rank0.jsonl").read_bytes())
    expected = RunSource(tmp_path / "big", cache_root=False).refresh()
    monkeypatch.setattr(ingest, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ranges, "RANGE_BYTES", 4000)
    monkeypatch.setattr(ranges, "MIN_RANGE_BYTES", 4000)
    workers.shutdown()  # workers started now see this test's environment
    seen = []
    real = ingest._run_in_workers
    monkeypatch.setattr(ingest, "_run_in_workers", lambda *a, **k: seen.append(len(a[1])) or real(*a, **k))
    got = RunSource(f"s3://{BUCKET}/runs/big").refresh()
    assert seen and seen[0] > 5
    where = ["row", "seg"]
    assert got.samples.drop(columns=where).equals(expected.samples.drop(columns=where))
    assert got.report.errors == expected.report.errors and len(got.report.errors) == 1
    workers.shutdown()


def test_a_followed_s3_run_reads_new_and_grown_objects(as_admin, server):
    """New objects are read, an object rewritten longer with its start intact only from where it was read."""
    s3 = server["s3"]
    body = "".join(json.dumps(sample(1, float(i))) + "\n" for i in range(3))
    s3.put_object(Bucket=BUCKET, Key="runs/live/r0.jsonl", Body=body.encode())
    source = RunSource(f"s3://{BUCKET}/runs/live")
    assert source.refresh().samples["reward"].tolist() == [0.0, 1.0, 2.0]
    s3.put_object(Bucket=BUCKET, Key="runs/live/r0.jsonl", Body=(body + json.dumps(sample(2, 9.0)) + "\n").encode())
    s3.put_object(Bucket=BUCKET, Key="runs/live/r1.jsonl", Body=(json.dumps(sample(3, 4.0)) + "\n").encode())
    again = source.refresh()
    assert sorted(again.samples["reward"].tolist()) == [0.0, 1.0, 2.0, 4.0, 9.0]
    assert source.last_status == {"r0.jsonl": "appended", "r1.jsonl": "parsed"}


def _one_line_error(result, url: str, *words: str, secret: str = "") -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert url in lines[0] and any(w in lines[0] for w in words), lines[0]
    if secret:
        assert secret not in result.stderr + result.stdout


def test_wrong_credentials_are_one_line(server, monkeypatch, tmp_path):
    """A key the server does not know: one line naming the URL, saying the credentials were refused."""
    env = _env(monkeypatch, server["endpoint"], ("AKIAWRONGKEYWRONGKEY", "wrong-" + SECRET_MARK + "-key-0000"),
               tmp_path)
    url = f"s3://{BUCKET}/runs/ppo_demo"
    _one_line_error(command("summary", url, env=env), url, "credentials were refused",
                    secret=env["AWS_SECRET_ACCESS_KEY"])


def test_access_denied_is_one_line(server, monkeypatch, tmp_path):
    """A user with no permission on the bucket: one line naming the URL, saying access was denied."""
    env = _env(monkeypatch, server["endpoint"], server["nobody"], tmp_path)
    url = f"s3://{BUCKET}/runs/ppo_demo"
    _one_line_error(command("summary", url, env=env), url, "access denied", secret=env["AWS_SECRET_ACCESS_KEY"])


def test_an_unreachable_endpoint_is_one_line(server, monkeypatch, tmp_path):
    """Nothing listens at the endpoint: one line naming the URL, saying the endpoint can't be reached."""
    env = _env(monkeypatch, f"http://127.0.0.1:{_free_port()}", server["admin"], tmp_path)
    url = f"s3://{BUCKET}/runs/ppo_demo"
    _one_line_error(command("summary", url, env=env), url, "can't be reached", secret=env["AWS_SECRET_ACCESS_KEY"])


def test_no_such_bucket_or_key_is_one_line(as_admin):
    """A bucket that does not exist, and a prefix with no objects: one line naming the URL each."""
    for url in ("s3://no-such-bucket-here/runs/a", f"s3://{BUCKET}/runs/no-such-run"):
        _one_line_error(command("summary", url, env=as_admin), url, "not found", "no such",
                        secret=as_admin["AWS_SECRET_ACCESS_KEY"])


def test_an_object_replaced_mid_read_caches_nothing(as_admin, server, isolated_cache):
    """An object replaced while its ranges are read raises one line naming it, and no manifest is kept:
    the next read parses the new object whole."""
    s3 = server["s3"]
    body = "".join(json.dumps(sample(1, float(i))) + "\n" for i in range(50)).encode()
    s3.put_object(Bucket=BUCKET, Key="runs/swap/r0.jsonl", Body=body)
    replaced = body.replace(b'"reward": 1.0', b'"reward": 7.0')

    def replace_it(done, total):  # called as ranges finish: the trainer rewrites the object meanwhile
        s3.put_object(Bucket=BUCKET, Key="runs/swap/r0.jsonl", Body=replaced)

    with pytest.raises(LocationError) as caught:
        RunSource(f"s3://{BUCKET}/runs/swap").refresh(replace_it)
    assert f"s3://{BUCKET}/runs/swap/r0.jsonl" in str(caught.value) and "replaced" in str(caught.value)
    assert not list(isolated_cache.rglob("manifest.json"))
    again = RunSource(f"s3://{BUCKET}/runs/swap").refresh()
    assert 7.0 in again.samples["reward"].tolist() and 1.0 not in again.samples["reward"].tolist()


@pytest.mark.ray
def test_an_s3_run_indexed_on_ray_prints_what_the_local_folder_prints(as_admin, isolated_cache):
    """``index s3://... --ray local`` (a Ray cluster started on this machine, its tasks reading their
    ranges from the S3 server) fills the cache; summary, search and findings of the S3 run then print
    what the local folder prints, and the secret key is in no output."""
    pytest.importorskip("ray")
    url = f"s3://{BUCKET}/runs/ppo_demo"
    indexed = command("index", url, "--ray", "local", "--json")
    assert indexed.returncode == 0, indexed.stderr
    report = json.loads(indexed.stdout)
    assert report["ray"] == "local" and report["ray_tasks"] == 4 and report["files_read"] == 4
    from rl_board.base.defaults import EOS_TOKEN, PAD_TOKEN

    reader = RunSource(url, PAD_TOKEN, eos_token=EOS_TOKEN)  # the settings index read with (the defaults)
    reader.refresh()
    assert set(reader.last_status.values()) == {"cached"}  # a second reader parses nothing
    for argv in (("summary", "--json"), ("search", "--regex", "the", "--json"), ("findings", "--json")):
        local = command(argv[0], str(REPO / "rollout_samples" / "ppo_demo"), *argv[1:], "--no-cache")
        remote = command(argv[0], url, *argv[1:])
        assert local.returncode == remote.returncode == 0, remote.stderr
        assert close_to(json.loads(remote.stdout), json.loads(local.stdout)), argv
        assert as_admin["AWS_SECRET_ACCESS_KEY"] not in remote.stdout + remote.stderr + indexed.stderr


def test_two_readers_at_once_share_a_cache_in_s3(as_admin, tmp_path):
    """Two processes reading the same S3 run at once, the cache at s3://…, each with its own local
    mirror: both print complete, identical output (the local folder's); a third process then opens the
    run from the shared cache without reading the logs; no temporary key is left."""
    url = f"s3://{BUCKET}/runs/ppo_demo"
    shared = f"s3://{BUCKET}/shared-cache"
    env = {**as_admin, "RL_BOARD_CACHE_DIR": shared}
    argv = [sys.executable, "-m", "rl_board", "summary", url, "--json"]
    readers = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                env={**os.environ, **env, "XDG_CACHE_HOME": str(tmp_path / name)})
               for name in ("a", "b")]
    outputs = [reader.communicate(timeout=300) for reader in readers]
    assert [reader.returncode for reader in readers] == [0, 0], outputs
    local = command("summary", str(REPO / "rollout_samples" / "ppo_demo"), "--json", "--no-cache")
    assert outputs[0][0] == outputs[1][0] and close_to(json.loads(outputs[0][0]), json.loads(local.stdout))
    third = command("index", url, "--json", env={**env, "XDG_CACHE_HOME": str(tmp_path / "c")})
    assert third.returncode == 0, third.stderr
    report = json.loads(third.stdout)
    assert report["files_read"] == 0 and report["files_cached"] == 4
    keys = [o["Key"] for o in server_objects(as_admin, "shared-cache/")]
    assert any(k.endswith("/manifest.json") for k in keys) and not any("/.tmp-" in k for k in keys)
    assert all(as_admin["AWS_SECRET_ACCESS_KEY"] not in out + err for out, err in outputs)


def server_objects(env: dict, prefix: str) -> list[dict]:
    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                      aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
    return s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])


@pytest.mark.ray
def test_ray_tasks_put_their_segments_in_a_shared_cache_at_a_url(as_admin, tmp_path):
    """With the cache at s3://…, each Ray task puts its segment in the shared cache itself (a cluster's
    nodes can't write this machine's folder); another machine's reader then opens the run from it."""
    pytest.importorskip("ray")
    url = f"s3://{BUCKET}/runs/ppo_demo"
    env = {**as_admin, "RL_BOARD_CACHE_DIR": f"s3://{BUCKET}/ray-cache"}
    indexed = command("index", url, "--ray", "local", "--json", env={**env, "XDG_CACHE_HOME": str(tmp_path / "a")})
    assert indexed.returncode == 0, indexed.stderr
    report = json.loads(indexed.stdout)
    assert report["ray_tasks"] == report["files_read"] > 0 and report["ray_segments_shared"] == report["ray_tasks"]
    keys = [o["Key"] for o in server_objects(as_admin, "ray-cache/")]
    assert sum("/seg-" in k for k in keys) == report["ray_tasks"] and not any("/.tmp-" in k for k in keys)
    other = command("index", url, "--json", env={**env, "XDG_CACHE_HOME": str(tmp_path / "b")})
    assert json.loads(other.stdout)["files_read"] == 0
    local = command("summary", str(REPO / "rollout_samples" / "ppo_demo"), "--json", "--no-cache")
    remote = command("summary", url, "--json", env={**env, "XDG_CACHE_HOME": str(tmp_path / "b")})
    assert close_to(json.loads(remote.stdout), json.loads(local.stdout))


def test_missing_credentials_are_one_line(server, monkeypatch, tmp_path):
    """No key anywhere the library looks (environment, ~/.aws, instance metadata off): one line naming
    the URL, saying no credentials were found or the request was refused."""
    env = _env(monkeypatch, server["endpoint"], ("", ""), tmp_path)
    env = {k: v for k, v in env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    clean = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    url = f"s3://{BUCKET}/runs/ppo_demo"
    result = subprocess.run([sys.executable, "-m", "rl_board", "summary", url], capture_output=True, text=True,
                            cwd=REPO, env={**clean, **env, "HOME": str(tmp_path)}, timeout=300)
    _one_line_error(result, url, "no credentials", "credentials were refused", "access denied")
