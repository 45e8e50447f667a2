"""``rl-board serve``: the page in Streamlit, with every server setting it needs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Every server setting ``serve`` needs, passed on the command line so they hold whatever folder it
# is started from (Streamlit reads .streamlit/config.toml only from the working folder; the
# repository's copy says the same for ``streamlit run app.py``).
SERVER_SETTINGS = {
    "server.headless": "true",
    "server.maxUploadSize": "1",
    "server.fileWatcherType": "none",  # the sources never change while serving (see .streamlit/config.toml)
    "browser.gatherUsageStats": "false",
    "client.showErrorDetails": "none",  # no traceback (with server paths) ever reaches a viewer
    "client.toolbarMode": "viewer",  # a viewer's options only: no Deploy button, no developer menu
    "runner.postScriptGC": "false",  # a full collection after every run held each answer back
    # Streamlit's cache of large messages lets a browser ask for one the server already
    # dropped under fast reruns ("Cached ForwardMsg MISS"), which kills the session: send all.
    "global.minCachedMessageSize": "1e15",
    "theme.base": "dark",
    "theme.primaryColor": "#4C9BE8",
}


def serve_command(args) -> list[str]:
    """The command that runs the page in Streamlit with every setting it needs."""
    script = Path(__file__).resolve().parent.parent / "views" / "main.py"
    command = [sys.executable, "-m", "streamlit", "run", str(script), "--server.address", args.address,
               "--server.port", str(args.port)]
    for name, value in SERVER_SETTINGS.items():
        command += [f"--{name}", value]
    return command


def _serve(args) -> int:
    """Run the page in Streamlit (this process becomes the server)."""
    env = dict(os.environ)
    if args.address not in ("127.0.0.1", "localhost", "::1") and not env.get("RL_BOARD_ROOTS"):
        print("warning: listening beyond this machine without --roots (RL_BOARD_ROOTS): anyone who reaches "
              "the port can read every log file this process can.", file=sys.stderr)
    if isinstance(args.root, str):  # a URL: the page lists it (and says so when it can't)
        env["RL_BOARD_ROOT"] = args.root
    elif args.root is not None:
        root = args.root.expanduser()
        if not root.is_dir():
            print(f"error: folder not found: {root}", file=sys.stderr)
            return 2
        env["RL_BOARD_ROOT"] = str(root.resolve())
    command = serve_command(args)
    print(f"RL Logging Board on http://{args.address}:{args.port}", file=sys.stderr, flush=True)
    os.execvpe(command[0], command, env)

