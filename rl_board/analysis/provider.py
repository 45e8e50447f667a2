"""The one door the page, the commands and the MCP server read through (TensorBoard's ``DataProvider``).

A view or a command reads a run as an ``analysis.Run`` (``source.load_run``) and everything else it
needs of the layers below (the runs under a root, what a folder holds, the trainer's scalars, tags,
caches, the tokenizer, the parsing workers, the settings' vocabulary) through the names listed here;
none of them imports ``store``, ``readers``, ``scalars`` or ``derive`` (``tests/test_layers.py``).

Each name is the lower layer's own object, imported when it is asked for (``__getattr__``), so a
command pays for the modules it touches and no more, as when it imported them itself. ``NAMES`` says where
each comes from; ``PARTS`` are modules read as a namespace (``memo.load``), each limited to the
members listed.
"""

from __future__ import annotations

import importlib

#: name -> the module it is taken from (the name is the module's own)
NAMES: dict[str, str] = {
    # where runs are: the runs under a root, the run of files lying in it, a root or folder refused
    "ROOT_RUN": "rl_board.store.tracking",
    "NoRunsError": "rl_board.store.tracking",
    "RootError": "rl_board.base.access",
    "discover_runs": "rl_board.store.discovery",
    "describe_runs": "rl_board.store.discovery",
    # what a folder holds and which reader opens it (rl-board detect, the page's report)
    "describe_folder": "rl_board.store.diagnosis",
    "compute_diagnosis": "rl_board.store.diagnosis",
    "format_diagnosis": "rl_board.store.diagnosis",
    "describe_size": "rl_board.readers",
    # how a run is read: the field mapping, the KL estimator, a source that changed under the read
    "FieldMappingError": "rl_board.readers",
    "parse_field_mapping": "rl_board.readers",
    "format_field_mapping": "rl_board.readers",
    "suggest_field_mapping": "rl_board.readers.mapping",
    "SourceChanged": "rl_board.readers",
    "KL_ESTIMATORS": "rl_board.derive.metrics",
    # turn faults: their kinds and the filter that keeps any
    "ANY": "rl_board.derive.faults",
    "KINDS": "rl_board.derive.faults",
    # tokens: the run's tokenizer and one sample's per-token values
    "TokenizerError": "rl_board.derive.tokenizer",
    "load_tokenizer": "rl_board.derive.tokenizer",
    "resolve_tokenizer": "rl_board.derive.tokenizer",
    "find_tokenizer": "rl_board.derive.tokenizer",
    "special_tokens": "rl_board.derive.tokenizer",
    "SampleTokens": "rl_board.derive.metrics",
    "compute_sample_tokens": "rl_board.derive.metrics",
    # the trainer's own scalars and their warning signs
    "ScalarsError": "rl_board.scalars",
    "discover": "rl_board.scalars",
    "load_scalars": "rl_board.scalars",
    "signature": "rl_board.scalars",
    "nearest_step": "rl_board.scalars",
    "Thresholds": "rl_board.scalars.signs",
    "compute_signs": "rl_board.scalars.signs",
    "default_series": "rl_board.scalars.signs",
    # tags and notes on samples, kept beside the cache
    "ANY_TAG": "rl_board.store.tags",
    "SUGGESTED_TAGS": "rl_board.store.tags",
    "TagConflict": "rl_board.store.tags",
    "TagsError": "rl_board.store.tags",
    "clean_tags": "rl_board.store.tags",
    "load_tags": "rl_board.store.tags",
    "set_tags": "rl_board.store.tags",
    "stamp": "rl_board.store.tags",
    "tags_path": "rl_board.store.tags",
    "update_tags": "rl_board.store.tags",
    # the caches: where they live, their size limit, clearing them
    "cache_limit": "rl_board.store.cache",
    "clear_caches": "rl_board.store.cache",
    "default_cache_root": "rl_board.store.cache",
    "list_caches": "rl_board.store.cache",
}

#: modules read as a namespace -> the members a caller may read of each
PARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    # the parsing worker processes: started warm by the page, forked by a command
    "workers": ("rl_board.store.workers", ("EARLY_SPAWN_BYTES", "warm_up", "warm_up_for")),
    # the read on a Ray cluster: its address, the last read's tasks, a progress line
    "cluster": ("rl_board.store.cluster", ("LAST_READ", "RAY_ENV", "address", "describe_progress")),
    # a command's output kept while the run's files are as they were
    "memo": ("rl_board.store.memo", ("clear", "fingerprint", "json_pieces", "key", "load", "save")),
}

__all__ = sorted([*NAMES, *PARTS])


class _Part:
    """A module seen through the listed members only, each read from the module when asked (a test's
    change to the module shows)."""

    def __init__(self, module: str, members: tuple[str, ...]):
        self._module, self._members = module, frozenset(members)

    def __getattr__(self, name: str):
        if name not in self._members:
            raise AttributeError(f"{self._module} is read through analysis.provider, which lists "
                                 f"{sorted(self._members)}; {name!r} is not among them")
        return getattr(importlib.import_module(self._module), name)

    def __repr__(self) -> str:
        return f"<{self._module} through analysis.provider: {', '.join(sorted(self._members))}>"


def __getattr__(name: str):
    # read from its module at each look-up, never kept here: a test's change to that module shows, as it
    # did when the caller imported the module itself
    if name in NAMES:
        return getattr(importlib.import_module(NAMES[name]), name)
    if name in PARTS:
        return _Part(*PARTS[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
