"""A run read from S3 (a moto server on loopback) against the same run read from the local folder.

Usage:  python benchmarks/bench_urls.py [--size small|full|grpo|10x] [--json FILE]

It writes the benchmark run of ``bench_load.ensure_run`` (``full``: about 540 MB over 4 rank files),
starts moto's S3 server on a loopback port (``python -m moto.server``), uploads the run, and times,
each in a fresh process with an empty cache:

- ``rl-board summary RUN --json`` of the local folder;
- the same of ``s3://bench/RUN``, and the bytes that crossed the loopback interface for it
  (``/proc/net/dev``: requests, responses and their headers), against the run's size;
- the same of the S3 run again with the cache the first read left (the logs are not read again).

Ratios are to numbers measured in the same run, never to constants. Nothing is asserted: the printed
table goes in the README. Needs ``pip install "rl-board[s3]" "moto[server]"``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import SIZES, compile_package, ensure_run  # noqa: E402

BUCKET = "bench"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _written(pid: int) -> int:
    """Bytes through the loopback interface so far (``/proc/net/dev``, both ways: requests and responses;
    machine-wide, so other loopback traffic while it runs is counted too)."""
    for line in Path("/proc/net/dev").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name.strip() == "lo":
            return int(rest.split()[0])
    return 0


def _summary(target: str, env: dict) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "rl_board", "summary", target, "--json"], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=3600)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"summary of {target} failed: {done.stderr.strip()}")
    return seconds, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=SIZES, default="full")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    compile_package()
    run = ensure_run(args.size)
    size = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    creds = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret", "AWS_DEFAULT_REGION": "us-east-1",
             "AWS_ENDPOINT_URL": endpoint}
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        import boto3

        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bench",
                          aws_secret_access_key="bench-secret")
        s3.create_bucket(Bucket=BUCKET)
        for path in sorted(run.rglob("*")):
            if path.is_file():
                s3.upload_file(str(path), BUCKET, f"{args.size}/{path.relative_to(run).as_posix()}")
        results = {}
        with tempfile.TemporaryDirectory() as local_cache, tempfile.TemporaryDirectory() as s3_cache:
            env = {**os.environ, **creds, "RL_BOARD_CACHE_DIR": local_cache}
            results["local_s"], local_out = _summary(str(run), env)
            env["RL_BOARD_CACHE_DIR"] = s3_cache
            before = _written(server.pid)
            results["s3_s"], s3_out = _summary(f"s3://{BUCKET}/{args.size}", env)
            results["s3_bytes_sent"] = _written(server.pid) - before
            before = _written(server.pid)
            results["s3_cached_s"], cached_out = _summary(f"s3://{BUCKET}/{args.size}", env)
            results["s3_cached_bytes_sent"] = _written(server.pid) - before
        results.update(size=args.size, run_bytes=size, same_output=local_out == s3_out == cached_out,
                       cpus=os.cpu_count(), machine=platform.platform())
    finally:
        server.terminate()
        server.wait(timeout=30)
    print("| run | bytes | local cold | S3 cold | ratio | loopback bytes / run | S3 cached | same output |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.size} | {size / 1e6:.0f} MB | {results['local_s']:.2f} s | {results['s3_s']:.2f} s | "
          f"{results['s3_s'] / results['local_s']:.2f} x | {results['s3_bytes_sent'] / size:.3f} | "
          f"{results['s3_cached_s']:.2f} s ({results['s3_cached_bytes_sent'] / 1e3:.0f} KB on loopback) | "
          f"{results['same_output']} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
