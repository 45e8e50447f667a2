"""The run a notebook gets: ``load`` (``rl_board.load``) reads a run folder as the page and the commands
do and returns a ``NotebookRun``: a ``Run`` with ``findings()`` besides, the command's ``--json`` dict. Here,
above the findings, so that ``Run`` (which the findings read) never imports them back."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from ..base.defaults import AUTO, token_option
from .findings import build_findings_json, get_findings
from .run import Run
from .source import load_run, read_settings


class NotebookRun(Run):
    """A ``Run`` read by ``load``, for a notebook: every query of ``Run`` and ``findings()``."""

    def findings(self) -> dict:
        """What ``rl-board findings --json`` prints for this run, the same dict: ``settings`` (``read_settings``:
        how the run was read) and ``findings`` (``Findings.to_json(full=True)``: each finding's ``kind``,
        ``first_step``, ``last_step``, ``evidence``, ``samples`` by ``sample_id``, ``severity`` and, where it has
        one, ``onset_step``), ranked, and ``not_checked`` (``findings.build_findings_json``)."""
        found = build_findings_json(get_findings(self), read_settings(self, self.max_per_step))
        return json.loads(json.dumps(found, allow_nan=False))  # the printed JSON's types: lists, not tuples


def load(path: Path | str, *, fields: dict[str, str] | list[str] | str | None = None, pad_token: str | None = AUTO,
         eos_token: str | None = AUTO, split: str | None = None, tokenizer: Path | str | None = None,
         max_samples_per_step: int | None = None, cache: bool = True, rename: dict[str, str] | None = None):
    """A run folder read as the page and the commands read it, for a notebook: ``rl_board.load(path)``.

    ``fields`` maps the board's fields to the run's own keys in the command line's direction
    (``--field reward=my_score``), ``{field: source key}``: ``{"reward": "my_score"}`` reads ``reward``
    from ``my_score`` (a dotted key reads a nested value); the command line's strings
    (``["reward=my_score"]``, or one string ``"reward=my_score,response=answer"``) work too. A mapped key the run's first
    lines don't hold is a warning, and an error when nothing loaded. The other read options are the
    page's and the commands' (``--pad-token``…), with their defaults: ``pad_token`` and ``eos_token``
    ("auto": those of the ``tokenizer_config.json`` beside the run's tokenizer, else ``<|endoftext|>``;
    None or "none" turns either off), ``split``, ``tokenizer`` (a ``tokenizer.json`` or a model folder;
    default: one found near the run), ``max_samples_per_step`` and ``cache`` (False: neither read nor
    write the board's cache). ``rename`` is the old spelling of the mapping, the other way round
    (``{"my_score": "reward"}``, pandas' ``rename`` direction): it works, with a ``DeprecationWarning``.

    Returns a ``NotebookRun``: ``run.findings()`` the findings command's dict, ``run.to_pandas()`` one row per sample by ``sample_id`` (``FILE:LINE``), its
    fields and metrics; ``run.steps`` one row per step; ``run.token_table(sample_id)`` one sample's
    per-token lists; ``run.record(sample_id)`` its whole record as a dict.
    Raises ``RootError`` for a folder that can't be read, ``FieldMappingError`` for a bad mapping,
    ``TokenizerError``, ``ValueError`` for a ``split`` the run doesn't have (naming the ones it has)."""
    from ..readers import FieldMappingError, parse_field_mapping

    if rename is not None:
        if fields is not None:
            raise TypeError("give fields= ({field: source key}) or the old rename=, not both")
        warnings.warn("load(rename={source key: field}) is deprecated: use fields={field: source key}, the "
                      "command line's direction (--field reward=my_score is fields={'reward': 'my_score'})",
                      DeprecationWarning, stacklevel=2)
        if not isinstance(rename, dict):
            raise FieldMappingError("rename= is a dict {source key: field}, e.g. {'my_score': 'reward'}; "
                                    "better: fields={'reward': 'my_score'}")
        fields = {canonical: source for source, canonical in rename.items()}
    if isinstance(fields, dict):
        fields = [f"{canonical}={source}" for canonical, source in fields.items()]
    mapping = parse_field_mapping(fields or [])
    run = load_run(path, token_option(pad_token), max_samples_per_step, None if cache else False, fields=mapping,
                   eos_token=token_option(eos_token), split=split, tokenizer=tokenizer, run_class=NotebookRun)
    if split and split not in run.splits:
        raise ValueError(f"{path} has no split {split!r}; "
                         + (f"its splits: {', '.join(run.splits)}" if run.splits else "its format has no splits"))
    if mapping:
        _check_mapping(run, mapping)
    return run


def _check_mapping(run, mapping: tuple[tuple[str, str], ...]) -> None:
    """Warn of each mapped source key the run's first lines don't hold (``Run.source_keys``); raise
    ``FieldMappingError`` instead when no sample loaded: a mapping that finds nothing is never silent."""
    from ..readers import FieldMappingError

    keys = {key for key, _ in run.source_keys()}
    if not keys:  # nothing could be read to check against
        return
    absent = [(c, s) for c, s in mapping if s not in keys and s.split(".", 1)[0] not in keys]
    if not absent:
        return
    shown = ", ".join(sorted(keys)[:20]) + (", …" if len(keys) > 20 else "")
    message = ("the mapping found nothing for " + ", ".join(f"{c} (key {s!r})" for c, s in absent)
               + f": the run's first lines have no such key. Keys there: {shown}.")
    if not len(run._samples):
        raise FieldMappingError(message + " Nothing loaded.")
    warnings.warn(message, UserWarning, stacklevel=3)
