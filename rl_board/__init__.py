"""RL Logging Board: token-level views of RLHF rollouts.

The core (everything here but ``views``) never imports Streamlit.
"""

from .loader import LoadReport, RootError, Run, RunSource, list_runs, load_run

__all__ = ["LoadReport", "RootError", "Run", "RunSource", "list_runs", "load_run"]
