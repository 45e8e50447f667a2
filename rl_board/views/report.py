"""What the last load read: counts, rejected lines and notes. Names and reasons are shown as plain text."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from ..analysis.checks import compute_data_checks
from ..analysis.provider import describe_folder, format_field_mapping, suggest_field_mapping
from ..analysis.run import Run
from ..base.text import alert_body

ERRORS_SHOWN = 200  # rejected lines listed in the table; the count covers all
ERRORS_QUOTED = 3  # rejected lines quoted above the table


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def render(run: Run) -> None:
    report = run.report
    st.text(f"{run.path} · {report.reader} · {_count(len(report.files), 'file')} · "
            f"{_count(report.lines_ok, 'sample')} loaded · {_count(report.lines_bad, 'line')} rejected · "
            f"{report.skipped:,} skipped by max samples per step")
    if run.options.fields:
        st.text(f"Field mapping: {format_field_mapping(run.options.fields)}")
    if report.notes:
        st.warning(alert_body("While loading:", "\n".join(report.notes)))
    if report.pending:
        st.info("Last line still being written (not loaded yet) in:")
        st.text(", ".join(report.pending))
    metrics = metrics_files(run.path, report.ignored_files)
    if metrics:
        st.caption("The trainer's own metrics, shown under Trainer metrics:")
        st.text(", ".join(metrics))
    ignored = [name for name in report.ignored_files if name not in metrics]
    if ignored:
        st.info(f"Files that are not {report.reader} files were ignored:")
        st.text(", ".join(ignored))
    if not report.lines_ok:
        _nothing_loaded(run)
    if report.errors:
        st.warning(f"{_count(report.lines_bad, 'line')} rejected; "
                   + ("the rest loaded. " if report.lines_ok else "") + "First ones:")
        st.text("\n".join(f"{f}:{line}: {reason}" for f, line, reason in report.errors[:ERRORS_QUOTED]))
        with st.expander("All rejected lines"):
            st.dataframe(pd.DataFrame(report.errors[:ERRORS_SHOWN], columns=["file", "line", "reason"]),
                         hide_index=True)
    checks = compute_data_checks(run._samples, run.files, run.options.eos_token)
    if checks:
        st.warning(alert_body("Numbers a log should not hold:", "\n".join(check.message for check in checks)))


def metrics_files(run_dir: Path, names) -> list[str]:
    """Those of ``names`` (files of the run folder) that are the trainer's metrics the Trainer metrics
    area reads (``scalars.discover``): TRL's trainer_state.json, TensorBoard's event files, a metrics JSONL."""
    from ..analysis.provider import discover

    found = discover(run_dir)
    if found is None:
        return []
    here = Path(run_dir).expanduser().resolve()
    if found.is_dir():  # TensorBoard: the folder's event files
        return [n for n in names if found.resolve() == here and n.startswith("events.out.tfevents")]
    return [n for n in names if (here / n).resolve() == found.resolve()]


def _nothing_loaded(run: Run) -> None:
    """Nothing loaded: say so, and what the lines hold, so the field mapping can name it."""
    report = run.report
    if not report.files:
        st.error("Nothing loaded: no reader finds its files in this folder.")
        st.text(describe_folder(run.path))
        return
    if not report.lines_bad:
        st.error("Nothing loaded: the run's files hold no lines yet.")
        return
    st.error(f"Nothing loaded: every line ({report.lines_bad:,}) was rejected. Each line must be a JSON object "
             'with an integer "step" and a numeric "reward" (or verl\'s "score"), or name where they are with a '
             "field mapping.")
    found = run.source_keys()
    if not found:
        return
    st.caption("Keys in the first lines of the first files:")
    st.text(", ".join(f"{key} ({kind})" for key, kind in found))
    example = suggest_field_mapping(found)
    st.info("Say which of these holds each field of the board in the sidebar's **Field mapping** box "
            "(CANONICAL=SOURCE pairs), then press **Load**" + (". For example:" if example else "."))
    if example:
        st.text(example)
