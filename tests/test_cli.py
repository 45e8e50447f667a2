"""The command line as a whole: every command survives a reader that goes away (``| head``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO, sample, write_lines


@pytest.mark.parametrize("args", [
    ["cache", "list"], ["summary", "{run}"], ["search", "{run}", "--regex", "a"], ["findings", "{run}"],
    ["metrics", "{trl}"], ["tags", "{run}"], ["--help"], ["search", "--help"],
])
def test_every_command_survives_a_closed_pipe(tmp_path, args):
    """With stdout a pipe whose reading end is already closed (``| head`` that has left), a command ends
    without a traceback or a BrokenPipe message: the pipe is closed before it starts, so nothing depends
    on timing."""
    write_lines(tmp_path / "run" / "r.jsonl", [sample(s, 1.0, response="a b") for s in range(1, 40)])
    (tmp_path / "trl").mkdir()
    (tmp_path / "trl" / "trainer_state.json").write_text('{"log_history": [{"step": 1, "loss": 0.5}]}')
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "rl_board",
                               *(a.format(run=tmp_path / "run", trl=tmp_path / "trl") for a in args)],
                              stdout=write, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120)
    finally:
        os.close(write)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == 0


def _helps():
    """(command, option, help) for every option of every command."""
    from rl_board.cli.parser import _parser

    parser = _parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name, sub in commands.items():
        for action in sub._actions:
            if action.help and action.option_strings:
                yield name, action.option_strings[-1], action.help


def test_help_texts_are_whole_phrases():
    """No option's help leaves a clause hanging ("it is (…"): with parentheses taken out, no clause ends
    on a word that needs another after it, and parentheses balance."""
    import re

    dangling = {"is", "are", "it", "the", "a", "an", "of", "to", "and", "or", "with", "by"}
    for command, option, text in _helps():
        assert text.count("(") == text.count(")"), (command, option, text)
        bare = re.sub(r"\([^()]*\)", "", text)
        for clause in re.split(r"[;:]", bare):
            words = clause.split()
            assert not words or words[-1].lower().strip(",.") not in dangling, (command, option, text)
