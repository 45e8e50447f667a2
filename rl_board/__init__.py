"""RL Logging Board: token-level views of RLHF rollouts.

The package's folders are its layers, lowest first; each imports only from the layers below it
(``tests/test_layers.py`` checks this by reading the imports):

- ``base``: field names, defaults, text helpers, colours, the allowed folders.
- ``readers``: bytes of each trainer's format -> canonical rows; ``scalars``: the trainer's own
  metrics files -> series.
- ``derive``: token metrics, the tokenizer and the per-sample columns computed while parsing.
- ``store``: file tracking, parsing workers, segments and their cache, tags, ``RunLoader``.
- ``analysis``: the run snapshot and every number, table, finding, search and figure built on it.
- ``views``: the page's areas (the only Streamlit code); ``cli``: the ``rl-board`` commands.

``writer`` (logging from a training loop) and ``demo`` (the bundled runs) stand beside them and
import nothing of the layers above ``base``. Modules are imported where used
(``from rl_board.analysis.source import load_run``), so a parsing worker process loads only what
parsing needs.

For a notebook: ``rl_board.load(path, **read_options)`` reads a run as the page does and returns
its ``Run`` (``analysis.notebook.load``; a field mapping reads as on the command line,
``fields={"reward": "my_score"}``), ``rl_board.diff(a, b, …)`` lines two runs up prompt by prompt
(``analysis.diff.diff``); both name a sample by its ``sample_id`` (``FILE:LINE``), as the commands do.
Importing ``rl_board`` imports nothing heavy until it is called.
``rl_board.__version__`` is the installed distribution's version (``importlib.metadata``), else, in a
source checkout that was not installed, the version its ``pyproject.toml`` names.
"""

__all__ = ["__version__", "diff", "load"]

DISTRIBUTION = "rl-board"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a checkout: the version the checkout's pyproject.toml names
        import tomllib
        from pathlib import Path

        try:
            with open(Path(__file__).resolve().parent.parent / "pyproject.toml", "rb") as fh:
                return tomllib.load(fh)["project"]["version"]
        except (OSError, KeyError, ValueError):
            return "0+unknown"


def __getattr__(name: str):
    if name == "load":  # imported on first use: ``import rl_board`` stays free of pandas and pyarrow
        from .analysis.notebook import load

        return load
    if name == "diff":
        from .analysis.diff import diff

        return diff
    if name == "__version__":
        globals()["__version__"] = value = _version()
        return value
    raise AttributeError(f"module 'rl_board' has no attribute {name!r}")
