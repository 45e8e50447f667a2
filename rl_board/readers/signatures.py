"""What each built-in reader's detection looks at, declared without importing the reader.

A reader module imports pyarrow and the modules it reads with (0.5 s for all of them); its detection
looks only at file names and, for verl, a file's first bytes. ``BUILTIN`` names each reader, its
module and the patterns its files match (the module's own ``SUFFIX`` and ``GLOBS``, checked equal by
``tests/test_registry.py``), so ``registry.detect`` imports a reader only when the folder could be
one of its runs (``might_hold``: the first part of one of its patterns names an entry of the folder,
a subfolder for a longer pattern) and then asks the reader itself, exactly as before. ``might_hold``
is a necessary condition of the reader's own check (``layout.holds``), never a sufficient one.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import translate
from pathlib import Path

from ..base.compression import variants
from ..base.location import open_file
from .layout import TEXT_SUFFIXES, first_match

#: What verl's detection (``formats/verl.py``'s ``matches``) reads of a dump folder's first
#: ``{step}.jsonl``: its first 64 KiB, where one of these turn markers makes a folder of verl's dumps
#: verl's run, not the board's own lines.
VERL_SNIFF_BYTES = 1 << 16
VERL_STEP_FILE = re.compile(r"^\d+\.jsonl$")
VERL_MARKERS = (b"<tool_call>", b"<tool_response>", b"<information>", b"<|im_start|>", b"<|im_end|>",
                b"<|start_header_id|>", b"<|eot_id|>")


@dataclass(frozen=True)
class Listing:
    """One folder's entries: every name (hidden ones too), those that are folders (links followed,
    as a glob does), and the suffixes of its files that are not hidden (a flat reader's files)."""
    names: tuple[str, ...]
    folders: tuple[str, ...]
    suffixes: frozenset[str]


def list_folder(run_dir: Path) -> Listing:
    """The entries of a local folder in one ``os.scandir`` (a file's type comes with its entry)."""
    names, folders, suffixes = [], [], set()
    with os.scandir(run_dir) as entries:
        for entry in entries:
            names.append(entry.name)
            if entry.is_dir():
                folders.append(entry.name)
            elif not entry.name.startswith(".") and entry.is_file():
                suffixes.add(os.path.splitext(entry.name)[1])
    return Listing(tuple(names), tuple(folders), frozenset(suffixes))


@dataclass(frozen=True)
class Signature:
    """A built-in reader as detection sees it before its module is imported.

    ``globs``: the module's ``GLOBS`` (empty: its files lie in the folder, ``*`` + ``suffix``);
    ``sniff``: a further necessary check of the folder's bytes, given the folder and its listing."""
    name: str
    module: str
    suffix: str
    globs: tuple[str, ...] = ()
    sniff: Callable[[Path, Listing], bool] | None = field(default=None, compare=False)

    def patterns(self) -> tuple[str, ...]:
        """Every pattern of the reader's files, compressed ones too where it reads text (``layout.patterns``)."""
        return _patterns(self)

    def might_hold(self, run_dir: Path, listing: Listing | None) -> bool:
        """Whether ``run_dir`` (whose entries are ``listing``; None: not listed, a URL's folder) could
        hold a run of this reader: False only where the reader's own check would say no."""
        if listing is None:
            return True
        names, folders = _first_parts(self)
        if not ((names is not None and any(map(names.match, listing.names)))
                or (folders is not None and any(map(folders.match, listing.folders)))):
            return False
        return self.sniff is None or self.sniff(run_dir, listing)


@functools.cache
def _patterns(signature: Signature) -> tuple[str, ...]:
    text = signature.suffix in TEXT_SUFFIXES
    return tuple(variant for pattern in signature.globs or ("*" + signature.suffix,)
                 for variant in (variants(pattern) if text else (pattern,)))


@functools.cache
def _first_parts(signature: Signature) -> tuple[re.Pattern | None, re.Pattern | None]:
    """(names a one-part pattern matches, folders a longer pattern starts in), each one regular expression
    (``fnmatch``'s, case-sensitive as a glob on POSIX), or None when the reader has no such pattern."""
    names, folders = set(), set()
    for pattern in signature.patterns():
        first, _, rest = pattern.partition("/")
        (folders if rest else names).add(first)

    def compiled(parts: set[str]) -> re.Pattern | None:
        return re.compile("|".join(translate(p) for p in sorted(parts))) if parts else None

    return compiled(names), compiled(folders)


def verl_sniff(run_dir: Path, listing: Listing) -> bool:
    """False only where verl's ``matches`` is: a dump folder (a ``{step}.jsonl`` in it) whose first file's
    first 64 KiB hold no turn marker, or a folder with neither such a file nor a subfolder."""
    try:
        found = first_match(run_dir, "[0-9]*.jsonl", keep=lambda p: bool(VERL_STEP_FILE.match(p.name)))
        if found is None:
            return bool(listing.folders)  # an experiment folder: its dump folders are asked by verl
        with open_file(found) as fh:
            head = fh.read(VERL_SNIFF_BYTES)
    except OSError:
        return True  # the reader's own check says what it says
    if len(head) == VERL_SNIFF_BYTES and b"\n" not in head:
        return True  # a first line longer than the sniff: verl reads it whole
    return any(marker in head for marker in VERL_MARKERS)


def _builtin(name: str, module: str, suffix: str, globs: tuple[str, ...] = (), sniff=None) -> Signature:
    return Signature(name, f"rl_board.readers.formats.{module}", suffix, globs, sniff)


#: Every built-in reader, in detection order: formats recognised by their layout or content first, then the
#: flat folders of lines or tables; TensorBoard text last (event files beside a run's own lines are its
#: scalars, not its samples). prime-rl's episodes come before its token exports: an output folder holding
#: both opens as episodes, and its token_exports/ folder as the token export.
BUILTIN = (
    _builtin("prime-rl", "prime_rl", ".jsonl", (
        "rollouts/step_*/*/*/traces.jsonl", "step_*/*/*/traces.jsonl", "rollouts/step_*/*_rollouts*.jsonl",
        "step_*/*_rollouts*.jsonl", "traces.jsonl")),
    _builtin("prime-rl-tokens", "prime_rl_tokens", ".jsonl",
             ("token_exports/step_*/rank_*.jsonl", "step_*/rank_*.jsonl")),
    _builtin("nemo-rl", "nemo_rl", ".jsonl", ("train_data_step*.jsonl",)),
    _builtin("art", "art", ".parquet", ("trajectories/*/*.parquet", "*/*.parquet")),
    _builtin("rllm", "rllm", ".json",
             ("episodes/*_step_*_epoch_*/episode_*.json", "*_step_*_epoch_*/episode_*.json")),
    _builtin("skyrl", "skyrl", ".jsonl", ("dumped_evals/*/*.jsonl", "*/*.jsonl")),
    _builtin("roll", "roll", ".jsonl", ("rollout_dump_data.step_*.jsonl",)),
    _builtin("areal", "areal", ".jsonl", ("*rollout/[0-9]*/*.jsonl", "[0-9]*/*.jsonl")),
    _builtin("tinker", "tinker", ".jsonl", ("iteration_*/*_rollout_summaries.jsonl",)),
    _builtin("slime", "slime", ".pt", ("rollout_data/*.pt", "*.pt")),
    _builtin("wandb-tables", "wandb_tables", ".json", ("files/media/table/**/*.table.json",)),
    _builtin("verifiers-v0", "verifiers_v0", ".jsonl", (
        "results.jsonl", "step_*/*/results.jsonl", "rollouts/step_*/*_rollouts*.jsonl", "step_*/*_rollouts*.jsonl",
        "*/*/results.jsonl")),
    _builtin("trackio", "trackio", ".db", ("*.db",)),
    _builtin("verl", "verl", ".jsonl", ("*/[0-9]*.jsonl", "[0-9]*.jsonl"), verl_sniff),
    _builtin("jsonl", "jsonl", ".jsonl"),
    _builtin("parquet", "parquet", ".parquet"),
    _builtin("tensorboard-text", "tensorboard_text", ".tfevents", ("events.out.tfevents.*",)),
)
