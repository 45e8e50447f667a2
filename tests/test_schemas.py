"""The commands' ``--json`` outputs: each is the dict of the command's one function (``cli.JSON_FUNCTIONS``),
the same one the MCP server returns, and each validates against its published JSON Schema (docs/schemas),
which names every key: a key added without the schema fails here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import REPO, command, write_lines

jsonschema = pytest.importorskip("jsonschema", reason="requirements-dev.txt pins jsonschema")

SAMPLES = REPO / "rollout_samples"
SCHEMAS = REPO / "docs" / "schemas"
VOLATILE = {"index": ("seconds",)}  # what differs between two calls of a command on the same run


def _schema(command_name: str) -> dict:
    return json.loads((SCHEMAS / f"{command_name}.json").read_text())


def _validate(command_name: str, out: dict) -> None:
    jsonschema.validate(out, _schema(command_name), cls=jsonschema.Draft202012Validator)


def _function_json(command_name: str, values: dict) -> dict:
    """The command's function's dict for ``values`` ({argument: value}), as the MCP server calls it."""
    from rl_board.cli import json_function
    from rl_board.cli.parser import command_args

    return json_function(command_name)(command_args(command_name, values))


def _same(command_name: str, a: dict, b: dict) -> None:
    for key in VOLATILE.get(command_name, ()):
        a, b = {k: v for k, v in a.items() if k != key}, {k: v for k, v in b.items() if k != key}
    assert a == b


def _tagged_run(tmp_path: Path) -> Path:
    """A copy of ppo_demo with one sample tagged, through the command line."""
    run = tmp_path / "ppo"
    shutil.copytree(SAMPLES / "ppo_demo", run)
    assert command("tags", str(run), "--sample", "rollout_data_rank0.jsonl:1", "--add", "odd").returncode == 0
    return run


#: (command, argv after the command (without --json), the same as the function's arguments)
CASES = [
    ("summary", [str(SAMPLES / "ppo_demo")], {"run_dir": str(SAMPLES / "ppo_demo")}),
    ("summary", [str(SAMPLES / "prime_rl_agent_demo")], {"run_dir": str(SAMPLES / "prime_rl_agent_demo")}),
    ("summary", [str(SAMPLES / "verl_grpo_demo")], {"run_dir": str(SAMPLES / "verl_grpo_demo")}),
    ("findings", [str(SAMPLES / "ppo_demo")], {"run_dir": str(SAMPLES / "ppo_demo")}),
    ("findings", [str(SAMPLES / "prime_rl_agent_demo")], {"run_dir": str(SAMPLES / "prime_rl_agent_demo")}),
    ("search", [str(SAMPLES / "ppo_demo"), "--regex", "the"], {"run_dir": str(SAMPLES / "ppo_demo"), "regex": "the"}),
    ("search", [str(SAMPLES / "prime_rl_agent_demo"), "--fault", "any", "--limit", "3"],
     {"run_dir": str(SAMPLES / "prime_rl_agent_demo"), "fault": "any", "limit": 3}),
    ("metrics", [str(SAMPLES / "trl_grpo_demo"), "--warnings"], {"path": str(SAMPLES / "trl_grpo_demo"), "warnings": True}),
    ("metrics", [str(SAMPLES / "trl_grpo_demo")], {"path": str(SAMPLES / "trl_grpo_demo")}),
    ("diff", [str(SAMPLES / "ppo_demo"), str(SAMPLES / "ppo_demo"), "--steps", "1:15", "--steps-b", "16:30"],
     {"run_dir": str(SAMPLES / "ppo_demo"), "run_b": str(SAMPLES / "ppo_demo"), "steps": "1:15", "steps_b": "16:30"}),
    ("detect", [str(SAMPLES / "verl_grpo_demo")], {"run_dir": str(SAMPLES / "verl_grpo_demo")}),
    ("detect", [str(SAMPLES)], {"run_dir": str(SAMPLES)}),
    ("runs", [str(SAMPLES)], {"root": str(SAMPLES)}),
    ("cache", ["list"], {"action": "list"}),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "argv", "values"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_command_prints_its_function_s_dict_and_it_fits_the_schema(name, argv, values):
    """What ``rl-board COMMAND … --json`` prints is the dict its function returns for the same arguments
    (what MCP returns), and it validates against docs/schemas/COMMAND.json."""
    done = command(name, *argv, "--json")
    assert done.returncode in (0, 1), done.stderr
    printed = json.loads(done.stdout)
    _validate(name, printed)
    _same(name, printed, _function_json(name, values))


@pytest.mark.slow
def test_tags_index_and_cache_clear_fit_their_schemas(tmp_path):
    """The tags listing and a tag change, an index and a cache clear validate against their schemas; the
    listing names the sample tagged by hand, the clear the one run cache the index wrote."""
    run = _tagged_run(tmp_path)
    listing = json.loads(command("tags", str(run), "--json").stdout)
    _validate("tags", listing)
    assert [(s["file"], s["line"], s["tags"]) for s in listing["samples"]] == [("rollout_data_rank0.jsonl", 1, ["odd"])]
    changed = json.loads(command("tags", str(run), "--sample", "rollout_data_rank0.jsonl:1", "--add", "b", "--json").stdout)
    _validate("tags", changed)
    assert changed["tags"] == ["odd", "b"]
    indexed = command("index", str(run), "--json")
    assert indexed.returncode == 0, indexed.stderr
    _validate("index", json.loads(indexed.stdout))
    _same("index", json.loads(indexed.stdout), _function_json("index", {"run_dir": str(run)}))
    cleared = json.loads(command("cache", "clear", str(run), "--json").stdout)
    _validate("cache", cleared)
    assert cleared["cleared"] == 1


def test_a_key_the_schema_does_not_name_fails_it(tmp_path):
    """A real summary with one key added at the top, in a step or in the settings no longer validates: every
    object of the schemas closes its keys."""
    write_lines(tmp_path / "rank0.jsonl", [{"step": 1, "reward": 1.0, "response": "a"},
                                           {"step": 2, "reward": 0.5, "response": "b"}])
    out = json.loads(command("summary", str(tmp_path), "--json").stdout)
    _validate("summary", out)
    for added in ({**out, "new": 1}, {**out, "steps": [{**out["steps"][0], "new": 1}]},
                  {**out, "settings": {**out["settings"], "new": 1}}):
        with pytest.raises(jsonschema.ValidationError, match="new"):
            _validate("summary", added)


def test_every_json_command_has_a_published_schema_linked_from_the_docs():
    """Each command of ``JSON_FUNCTIONS`` has docs/schemas/COMMAND.json (a valid 2020-12 schema whose every object
    closes its keys), no schema is of another command, and docs/commands.md links each."""
    from rl_board.cli import JSON_FUNCTIONS

    assert {p.stem for p in SCHEMAS.glob("*.json")} == set(JSON_FUNCTIONS)
    docs = (REPO / "docs" / "commands.md").read_text()
    for name in JSON_FUNCTIONS:
        schema = _schema(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert f"schemas/{name}.json" in docs
        _all_closed(name, schema)


def _all_closed(name: str, node) -> None:
    """Every object of the schema ``node`` that lists its properties allows no other."""
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is False, (name, sorted(node["properties"]))
        for value in node.values():
            _all_closed(name, value)
    elif isinstance(node, list):
        for value in node:
            _all_closed(name, value)


@pytest.mark.slow
def test_a_search_hit_and_the_sample_it_names_have_one_address_shape(tmp_path):
    """A search hit's address opens the same sample in ``analysis.address`` (the MCP sample tool), whose JSON
    gives the same address, step, file, line and position; the K-th of a ROLL line's three samples is
    FILE:1#K in both, and FILE:1 still opens the line's first."""
    from test_roll import T1, T2, T3, _dump

    from rl_board.analysis.address import build_sample_json, find_sample
    from rl_board.analysis.source import load_run

    keys = ("address", "step", "file", "line", "position")
    _dump(tmp_path / "dump", 1, [T1, T2, T3])
    name = "rollout_dump_data.step_1.jsonl"
    for folder, regex, addresses in ((SAMPLES / "ppo_demo", "café", None),
                                     (tmp_path / "dump", "Uhr", [f"{name}:1#0", f"{name}:1#1", f"{name}:1#2"])):
        hits = json.loads(command("search", str(folder), "--regex", regex, "--json", "--limit", "3").stdout)["samples"]
        assert len(hits) == 3
        if addresses is None:  # a line of one sample: FILE:LINE
            addresses = [f"{h['file']}:{h['line']}" for h in hits]
        assert [h["address"] for h in hits] == addresses
        run = load_run(folder, cache_root=False)
        for hit in hits:
            got = build_sample_json(run, find_sample(run, hit["address"]), 1, 1)
            assert {k: got.get(k) for k in keys} == {k: hit.get(k) for k in keys}
    assert build_sample_json(run, find_sample(run, f"{name}:1"), 1, 1)["address"] == f"{name}:1#0"
