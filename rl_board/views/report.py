"""What the last load read: counts, rejected lines and notes. Names and reasons are shown as plain text."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ..checks import compute_data_checks
from ..loader import Run
from ..readers import format_field_mapping

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
        st.warning("While loading:")
        st.text("\n".join(report.notes))
    if report.pending:
        st.info("Last line still being written (not loaded yet) in:")
        st.text(", ".join(report.pending))
    if report.ignored_files:
        st.info(f"Files that are not {report.reader} files were ignored:")
        st.text(", ".join(report.ignored_files))
    if report.errors:
        st.warning(f"{_count(report.lines_bad, 'line')} rejected; the rest loaded. First ones:")
        st.text("\n".join(f"{f}:{line}: {reason}" for f, line, reason in report.errors[:ERRORS_QUOTED]))
        with st.expander("All rejected lines"):
            st.dataframe(pd.DataFrame(report.errors[:ERRORS_SHOWN], columns=["file", "line", "reason"]),
                         hide_index=True)
    checks = compute_data_checks(run.samples, run.files)
    if checks:
        st.warning("Numbers a log should not hold:")
        st.text("\n".join(check.message for check in checks))
    if not report.lines_ok:
        st.error("No usable lines in this run: every line was rejected or the files are empty. Each line must be "
                 'a JSON object with an integer "step" and a numeric "reward".')
