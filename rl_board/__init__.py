"""RL Logging Board: token-level views of RLHF rollouts.

The package's folders are its layers, lowest first; each imports only from the layers below it
(``tests/test_layers.py`` checks this by reading the imports):

- ``base``: field names, defaults, text helpers, colours, the allowed folders.
- ``readers``: bytes of each trainer's format -> canonical rows; ``scalars``: the trainer's own
  metrics files -> series.
- ``derive``: token metrics, the tokenizer and the per-sample columns computed while parsing.
- ``store``: file tracking, parsing workers, segments and their cache, tags, ``RunSource``.
- ``analysis``: the run snapshot and every number, table, finding, search and figure built on it.
- ``views``: the page's areas (the only Streamlit code); ``cli``: the ``rl-board`` commands.

``writer`` (logging from a training loop) and ``demo`` (the bundled runs) stand beside them and
import nothing of the layers above ``base``. Modules are imported where used
(``from rl_board.analysis.source import load_run``), so a parsing worker process loads only what
parsing needs.
"""
