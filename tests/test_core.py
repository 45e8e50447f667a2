"""The core package never imports Streamlit."""

import subprocess
import sys

from conftest import REPO


def test_core_imports_no_streamlit():
    """Importing every core module leaves streamlit out of sys.modules."""
    code = ("import sys, rl_board, rl_board.loader, rl_board.metrics, rl_board.figures, rl_board.tables, "
            "rl_board.summary, rl_board.cache, rl_board.access, rl_board.search, rl_board.analysis, rl_board.colors, "
            "rl_board.writer, rl_board.scalars, rl_board.scalars.trl, rl_board.scalars.jsonl, "
            "rl_board.scalars.tensorboard, rl_board.readers, rl_board.readers.jsonl, rl_board.readers.parquet, rl_board.run, rl_board.ingest, rl_board.derive, rl_board.tracking, rl_board.segments, rl_board.demo, rl_board.tags, rl_board.prompts, rl_board.__main__; "
            "print('streamlit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"
