"""The button that downloads the run on screen as one self-contained HTML report (``analysis.report``: the
file ``rl-board report`` writes), built only when it is clicked."""

from __future__ import annotations

import streamlit as st

from ..analysis.report import ReportSettings, board_version, build_report_html, report_name
from ..analysis.run import Run
from ..analysis.source import read_settings


def render(run: Run, settings) -> None:
    def build() -> bytes:  # called by Streamlit when the button is clicked, outside this script run
        from ..analysis.findings import get_findings  # kept in the run's cache by the panel's checks

        made = ReportSettings(f"the page's report button (rl-board serve), run {report_name(run.path)}",
                              read_settings(run, settings.max_per_step), board_version())
        return build_report_html(run, get_findings(run), made).encode("utf-8")

    name = report_name(run.path).rstrip("/").rsplit("/", 1)[-1] or "run"  # a URL's last part
    st.download_button("Download a report (HTML)", data=build, file_name=f"{name}.report.html", mime="text/html",
                       on_click="ignore", key="report_download",
                       help="One HTML file of this run to share: its recap, main curves, every finding with its "
                            "evidence and samples. It opens in any browser, with no network and no board.")
