"""RL Logging Board: ``streamlit run app.py`` (or ``./start.sh``). The page lives in ``rl_board/views/main.py``."""

from rl_board.views.main import render_page

render_page()
