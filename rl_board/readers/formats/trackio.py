"""trackio databases: the ``traces`` table of a project's SQLite file (``{project}.db``).

trackio (``trackio.log({"rollouts": [trackio.Trace(messages, metadata)], step=N})``; TRL's
async GRPO and verl's rollout trace log this way) keeps one database per project in
``TRACKIO_DIR`` (``~/.cache/huggingface/trackio`` unless ``TRACKIO_DIR`` is set). Each trace
is a row of ``traces``: ``step``, ``key``, ``trace_index``, ``run_name``, ``messages`` (JSON:
OpenAI-style chat messages) and ``metadata`` (JSON: TRL writes ``reward``, ``reward_std``,
``rewards/<func>``, ``advantage``, ``group_id``, ``model_version``, token counts). One sample
per row: its turns are the messages (``trainable`` null), its reward ``metadata.reward``
(none when the metadata has no reward), its extras every other number or boolean of the
metadata. Each database (project) of the folder is a split. The database is opened read-only (``file:...?mode=ro``; immutable when no writer has
its write-ahead log open, so not even SQLite's side files are created) and never written.

Tables logged with ``trackio.Table`` (TRL's ``completions``: ``trackio.log({"completions":
trackio.Table(dataframe=df)})``, a row per completion: ``step`` as text, ``prompt``, ``completion``, each
reward function's column, ``advantage`` and an ``image`` column of ``trackio.Image`` lists) are rows of the
``metrics`` table holding ``{KEY: {"_type": "trackio.table", "_value": [row, ...]}}``: each row of a table
whose rows have a ``prompt``, ``completion`` or ``response`` text is a sample too (other tables are not
rollouts). Its step is its ``step`` (the text of an integer is that integer), else the metrics row's; its
reward its ``reward``, else (TRL: ``completion`` and ``advantage``) the sum of its reward-function columns;
its prompt and response ``prompt`` and ``completion`` (or ``response``); its other numbers extras. A row with
``trackio.Image`` cells is a user turn (its images, then its prompt) and an assistant turn (its completion).
Such a sample's line is ``TABLE_LINE`` + the metrics row's id × ``TABLE_ROWS`` + its place among that row's
table rows (from 1), so it never meets a trace's row id.

A database is a program as much as data (a ``traces`` VIEW may count to 10**11), so every query runs
under a time limit (``RL_BOARD_SQLITE_SECONDS``, default ``DEFAULT_QUERY_SECONDS``; SQLite's progress
handler interrupts it), and ``traces`` must be a table. Only a regular file is opened: a FIFO named
``proj.db`` would block the open forever.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path, PurePosixPath
from urllib.parse import quote

import orjson
import pyarrow as pa

from ...base import fields as F
from ...base.defaults import setting
from ...base.location import as_path, open_file
from ..base import FileError, ReadOptions, SourceChanged
from ..turns import number, numbers, sample_rows, turns

NAME = "trackio"
SUFFIX = ".db"
APPENDABLE = False
ALIASES: dict[str, str] = {}
GLOBS = ("*.db",)
_QUERY = ("SELECT rowid, step, key, trace_index, run_name, messages, metadata FROM traces")
_SQLITE_HEADER = b"SQLite format 3\x00"
_TABLES_QUERY = ("SELECT id, step, run_name, metrics FROM metrics WHERE CAST(metrics AS TEXT) LIKE "
                 "'%\"trackio.table\"%'")
TABLE_LINE = 10**12  # a logged table row's line: TABLE_LINE + its metrics row's id x TABLE_ROWS + its place
TABLE_ROWS = 10**6  # table rows one metrics row may give; those past it are named and left out
QUERY_SECONDS_ENV = "RL_BOARD_SQLITE_SECONDS"
DEFAULT_QUERY_SECONDS = 20.0  # a query of one database may run this long (trackio's own: well under a second)
_PROGRESS_STEPS = 10_000  # SQLite virtual-machine steps between looks at the clock
_SPECIAL = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}  # as serialize_values writes them


def split_of(name: str) -> str | None:
    """Each database (a trackio project) is a split of its own, so projects never mix."""
    return PurePosixPath(name).name[: -len(SUFFIX)] if name.endswith(SUFFIX) else None


def matches(run_dir: Path) -> bool:
    """A folder holding a ``.db`` regular file that starts like an SQLite database."""
    try:
        for path in as_path(run_dir).glob("*.db"):
            if not path.is_file():  # a FIFO (or a device) named *.db: opening it may never return
                continue
            with open_file(path) as fh:
                if fh.read(16) == _SQLITE_HEADER:
                    return True
    except OSError:
        return False
    return False


def query_seconds() -> float:
    """``$RL_BOARD_SQLITE_SECONDS`` (a positive number, at most an hour), else ``DEFAULT_QUERY_SECONDS``."""
    return setting(QUERY_SECONDS_ENV)


def _time_limited(conn: sqlite3.Connection) -> sqlite3.Connection:
    """``conn`` with every query from now on interrupted past ``query_seconds()`` (``OperationalError``:
    interrupted)."""
    deadline = time.monotonic() + query_seconds()
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_STEPS)
    return conn


def _too_slow(exc: sqlite3.Error) -> bool:
    return "interrupted" in str(exc)


def _why(exc: sqlite3.Error) -> str:
    """An SQLite error as the reason a file is unreadable; the time limit named with how to raise it."""
    if _too_slow(exc):
        return (f"its query ran past the limit of {query_seconds():g} s (set {QUERY_SECONDS_ENV} to allow "
                "longer)")
    return str(exc)


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """The database at ``path`` opened read-only, never written, its queries time-limited. Without a
    write-ahead log beside it (no writer has it open), as immutable: SQLite then creates no
    ``-wal``/``-shm`` files either. With one (trackio is writing), read-only through the writer's log,
    so its newest rows count. ``sqlite3.DatabaseError`` when ``traces`` is no table (a view)."""
    path = Path(path).resolve()
    if not stat.S_ISREG(os.stat(path).st_mode):  # SQLite's open of a FIFO would wait for a writer
        raise sqlite3.DatabaseError("not a regular file")
    live = path.with_name(path.name + "-wal").exists()
    conn = sqlite3.connect("file:" + quote(str(path)) + ("?mode=ro" if live else "?mode=ro&immutable=1"), uri=True)
    try:
        _check_traces(_time_limited(conn))
    except sqlite3.DatabaseError:
        conn.close()
        raise
    return conn


def _check_traces(conn: sqlite3.Connection) -> None:
    """``sqlite3.DatabaseError`` unless ``traces`` is absent or a table (trackio's): a view is a query
    of the database's author, not rows."""
    kind = conn.execute("SELECT type FROM sqlite_master WHERE name = 'traces'").fetchone()
    if kind is not None and kind[0] != "table":
        raise sqlite3.DatabaseError(f"traces is a {kind[0]}, not trackio's table")


def _json(value):
    """A JSON column's value (text or, as trackio stores orjson's bytes, a blob)."""
    if value is None:
        return None
    return orjson.loads(value)


def sample(row: tuple) -> dict | str:
    """One ``traces`` row (rowid, step, key, trace_index, run_name, messages, metadata) as a sample
    dict (``turns.sample_rows``), or why it is rejected."""
    rowid, step, key, index, run_name, messages, metadata = row
    if not isinstance(step, int):
        return f"'step' must be an integer, got {step!r}"
    try:
        messages, metadata = _json(messages), _json(metadata)
    except orjson.JSONDecodeError as exc:
        return f"messages or metadata are not JSON ({exc})"
    metadata = ({k: _SPECIAL.get(v, v) if isinstance(v, str) else v for k, v in metadata.items()}
                if isinstance(metadata, dict) else {})
    reward = number(metadata.get("reward"))
    extras = {k: v for k, v in numbers(metadata).items() if k != "reward"}
    return {F.STEP: step, F.REWARD: reward, F.MESSAGES: turns(messages if isinstance(messages, list) else []),
            "extras": extras, "line": int(rowid), "offset": int(rowid),
            "fields": {"key": key, "trace_index": index, "run_name": run_name, "metadata": metadata}}


def _has_metrics(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'metrics' AND type = 'table'").fetchone() is not None


def _logged_rows(metrics) -> list[tuple[str, object]]:
    """(key, row) of each row of each ``trackio.Table`` a metrics row logged, keys in order."""
    values = _json(metrics)
    if not isinstance(values, dict):
        return []
    return [(key, row) for key in sorted(values) if isinstance(values[key], dict)
            and values[key].get("_type") == "trackio.table" and isinstance(values[key].get("_value"), list)
            and _holds_samples(values[key]["_value"]) for row in values[key]["_value"]]


def _holds_samples(rows: list) -> bool:
    """Whether a logged table is one of samples: a row of it has a ``prompt``, ``completion`` or ``response``
    text (a table of anything else, an experiment's results, is no rollout)."""
    return any(isinstance(row, dict) and any(isinstance(row.get(k), str) for k in ("prompt", "completion", "response"))
               for row in rows)


def _is_image(value) -> bool:
    return isinstance(value, dict) and value.get("_type") == "trackio.image"


def table_sample(key: str, row, step: int, run_name, rowid: int, place: int) -> dict | str:
    """Row ``place`` (0-based) of the tables logged in metrics row ``rowid`` as a sample dict
    (``turns.sample_rows``; see the module's docstring), or why it is rejected."""
    from .wandb_tables import integer_steps

    if not isinstance(row, dict):
        return "a logged table's row that is not an object"
    record = integer_steps(dict(row))
    if type(record.get(F.STEP)) is int:
        step = record[F.STEP]
    images = [image for value in record.values()
              for image in (value if isinstance(value, list) else [value]) if _is_image(image)]
    prompt = next((record[k] for k in ("prompt",) if isinstance(record.get(k), str)), None)
    response = next((record[k] for k in ("completion", "response") if isinstance(record.get(k), str)), None)
    messages = None
    if images:
        messages = turns([{"role": "user", "content": [*images, {"type": "text", "text": prompt or ""}]},
                          {"role": "assistant", "content": response or ""}])
    extras = {k: v for k, v in numbers(record).items() if k not in (F.STEP, F.REWARD)}
    return {F.STEP: step, F.REWARD: number(record.get(F.REWARD)), F.MESSAGES: messages, "prompt": prompt,
            "response": response, "extras": extras, "line": TABLE_LINE + rowid * TABLE_ROWS + place + 1,
            "offset": -rowid, "length": place,
            "fields": {"key": key, "run_name": run_name, "row": {k: v for k, v in row.items() if k != F.STEP}}}


def _table_samples(conn: sqlite3.Connection) -> tuple[list[dict], list[tuple[int, str]], int]:
    """(samples, (line, reason) of each rejected one, table rows) of the tables the metrics rows logged."""
    if not _has_metrics(conn):
        return [], [], 0
    samples, errors, count = [], [], 0
    for rowid, step, run_name, metrics in conn.execute(_TABLES_QUERY + " ORDER BY id").fetchall():
        try:
            rows = _logged_rows(metrics)
        except orjson.JSONDecodeError as exc:
            errors.append((TABLE_LINE + rowid * TABLE_ROWS, f"metrics are not JSON ({exc})"))
            continue
        count += len(rows)
        if len(rows) >= TABLE_ROWS:
            errors.append((TABLE_LINE + rowid * TABLE_ROWS, f"{len(rows):,} table rows: those from the "
                                                            f"{TABLE_ROWS:,}th on are left out"))
        for place, (key, row) in enumerate(rows[:TABLE_ROWS - 1]):
            got = table_sample(key, row, step if isinstance(step, int) else 0, run_name, rowid, place)
            if isinstance(got, str):
                errors.append((TABLE_LINE + rowid * TABLE_ROWS + place + 1, got))
            else:
                samples.append(got)
    return samples, errors, count


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, (row id, reason) for each rejected row, rows of ``traces``); a sample's line
    is its row id."""
    try:
        conn = _connect_read_only(path)
    except (sqlite3.Error, OSError) as exc:
        raise FileError(f"not a readable SQLite database: {_why(exc) if isinstance(exc, sqlite3.Error) else exc}"
                        ) from exc
    try:
        has_traces = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'traces'").fetchone() is not None
        tables = _table_samples(conn)
        rows = conn.execute(_QUERY + " ORDER BY rowid").fetchall() if has_traces or not tables[0] else []
    except sqlite3.Error as exc:
        raise FileError(_why(exc) if _too_slow(exc) else f"no readable traces table: {exc}") from exc
    finally:
        conn.close()
    samples, errors = [], []
    for row in rows:
        got = sample(row)
        if isinstance(got, str):
            errors.append((int(row[0]), got))
        else:
            samples.append(got)
    return sample_rows(samples + tables[0]), errors + tables[1], len(rows) + tables[2]


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """The trace of row id ``offset``, read from a copy in memory of the database ``fh`` holds (the
    file is never written). ``fh`` may have served another row before (``Run.records`` reads a file's rows
    through one handle): the database is read from its start."""
    fh.seek(0)
    data = bytearray(fh.read())
    if data[18:20] == b"\x02\x02":  # a write-ahead-log database: read its main file as a plain one
        data[18:20] = b"\x01\x01"
    conn = sqlite3.connect(":memory:")
    try:
        conn.deserialize(bytes(data))
        _check_traces(_time_limited(conn))
        if offset < 0:  # a logged table's row (``table_sample``)
            row = conn.execute("SELECT id, step, run_name, metrics FROM metrics WHERE id = ?", (-offset,)).fetchone()
        else:
            row = conn.execute(_QUERY + " WHERE rowid = ?", (offset,)).fetchone()
    except sqlite3.Error as exc:
        raise SourceChanged(f"{name} can't be read any more ({_why(exc)}); refresh it.") from exc
    finally:
        conn.close()
    if offset < 0 and row is not None:
        rows = _logged_rows(row[3])
        got = (table_sample(*rows[length], row[1], row[2], -offset, length) if 0 <= length < len(rows)
               else "gone")
        if isinstance(got, str):
            raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
        return {**got["fields"], F.STEP: got[F.STEP], F.REWARD: got[F.REWARD], "prompt": got["prompt"],
                "response": got["response"], **({F.MESSAGES: got[F.MESSAGES]} if got[F.MESSAGES] else {}),
                **got["extras"]}
    got = sample(row) if row is not None else "gone"
    if isinstance(got, str):
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    return {**got["fields"], F.STEP: got[F.STEP], F.REWARD: got[F.REWARD], F.MESSAGES: got[F.MESSAGES],
            **got["extras"]}
