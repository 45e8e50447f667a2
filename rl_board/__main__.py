"""``python -m rl_board``: the command line (``rl_board.cli``)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
