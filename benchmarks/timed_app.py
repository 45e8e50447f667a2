"""The board as ``bench_viewers.py`` serves it: the same page, with the server's answer to every
rerun timed. Benchmark only.

For each rerun a browser asks for, it appends one JSON line to ``$RL_BOARD_BENCH_ANSWERS``:
the session, when the request reached the server and when the server sent the message that the
run is finished (``time.monotonic()``). Both are taken on the server's event loop, so the time
does not include the browser drawing the page, which on a real team happens on each viewer's own
machine.
"""

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streamlit.runtime.runtime import Runtime  # noqa: E402

from rl_board.views.main import render_page  # noqa: E402


def _time_answers() -> None:
    """Wrap the two places every rerun passes on the server: a browser's request arriving, and the
    'script finished' message leaving."""
    log, asked = Path(os.environ["RL_BOARD_BENCH_ANSWERS"]), {}
    handle_backmsg, send_message = Runtime.handle_backmsg, Runtime._send_message

    def timed_handle_backmsg(self, session_id, msg, *args, **kwargs):
        if msg.WhichOneof("type") == "rerun_script":
            asked.setdefault(session_id, time.monotonic())
        return handle_backmsg(self, session_id, msg, *args, **kwargs)

    def timed_send_message(self, session_info, msg):
        send_message(self, session_info, msg)
        if msg.WhichOneof("type") == "script_finished":
            session = session_info.session.id
            start = asked.pop(session, None)
            if start is not None:
                with log.open("a") as out:
                    out.write(json.dumps({"session": session, "asked": start, "answered": time.monotonic(),
                                          "status": int(msg.script_finished)}) + "\n")

    Runtime.handle_backmsg, Runtime._send_message = timed_handle_backmsg, timed_send_message
    Runtime._rl_board_timed = True


if not getattr(Runtime, "_rl_board_timed", False):
    _time_answers()
render_page()
