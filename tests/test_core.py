"""The core package never imports Streamlit."""

import subprocess
import sys

import pytest
from conftest import REPO


@pytest.mark.slow
def test_core_imports_no_streamlit():
    """Importing every core module leaves streamlit out of sys.modules."""
    code = ("import sys, rl_board, rl_board.store.loader, rl_board.derive.metrics, rl_board.analysis.figures, rl_board.analysis.tables, "
            "rl_board.analysis.summary, rl_board.store.cache, rl_board.base.access, rl_board.analysis.search, rl_board.analysis.drivers, rl_board.base.colors, "
            "rl_board.writer, rl_board.scalars, rl_board.scalars.trl, rl_board.scalars.jsonl, "
            "rl_board.scalars.tensorboard, rl_board.readers, rl_board.readers.formats.jsonl, rl_board.readers.formats.parquet, rl_board.analysis.run, rl_board.store.ingest, rl_board.derive.samples, rl_board.store.tracking, rl_board.store.segments, rl_board.demo, rl_board.store.tags, rl_board.analysis.prompts, rl_board.cli; "
            "print('streamlit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"
