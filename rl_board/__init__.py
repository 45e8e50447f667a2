"""RL Logging Board: token-level views of RLHF rollouts.

The core (everything here but ``views``) never imports Streamlit. Modules are
imported where used (``from rl_board.loader import load_run``), so a parsing
worker process loads only what parsing needs.
"""
