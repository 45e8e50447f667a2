"""``python -m rl_board``: the command line (``rl_board.cli``)."""

from .cli import run

if __name__ == "__main__":
    run()
