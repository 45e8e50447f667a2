"""What the last load read: counts, rejected lines and notes."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ..loader import Run

ERRORS_SHOWN = 200  # rejected lines listed in the table; the count covers all


def render(run: Run) -> None:
    report = run.report
    st.caption(f"{run.path} · {len(report.files)} files · {report.lines_ok:,} samples loaded · "
               f"{report.lines_bad:,} lines rejected · {report.skipped:,} skipped by max samples per step")
    for note in report.notes:
        st.warning(note)
    if report.pending:
        st.info(f"Still being written (last line not loaded yet): {', '.join(report.pending)}")
    if report.ignored_files:
        st.info(f"Not .jsonl, ignored: {', '.join(report.ignored_files)}")
    if report.errors:
        first = "; ".join(f"{f}:{line}: {reason}" for f, line, reason in report.errors[:3])
        st.warning(f"{report.lines_bad:,} lines rejected, e.g. {first}")
        with st.expander("Rejected lines"):
            st.dataframe(pd.DataFrame(report.errors[:ERRORS_SHOWN], columns=["file", "line", "reason"]),
                         hide_index=True)
    if not report.lines_ok:
        st.error("No usable lines in this run: every line was rejected or the files are empty. Each line must be "
                 'a JSON object with an integer "step" and a numeric "reward".')
