"""Runs of the Ray-era trainers, written the way each trainer's own writer code writes them.

Each function follows its writer where it shapes the bytes (the source is named in its
docstring); only the objects being written (a trajectory's turns, rewards) are built by hand.
The chat template is Qwen2.5's ChatML (its ``tokenizer_config.json`` ``chat_template``), the
one these trainers' agent examples use.
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIAL = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")


def chatml_message(message: dict) -> str:
    """One message as Qwen2.5's chat template renders it (a tool call as a Hermes block)."""
    if message["role"] == "tool":
        return "<|im_start|>user\n<tool_response>\n" + message["content"] + "\n</tool_response><|im_end|>\n"
    text = "<|im_start|>" + message["role"]
    if message.get("content"):
        text += "\n" + message["content"]
    for call in message.get("tool_calls", []):
        text += ('\n<tool_call>\n{"name": "' + call["name"] + '", "arguments": '
                 + json.dumps(call["arguments"]) + "}\n</tool_call>")
    return text + "<|im_end|>\n"


def chatml(messages: list[dict], add_generation_prompt: bool = False) -> str:
    """The template's text of ``messages`` (consecutive tool messages share one user turn, as in Qwen2.5)."""
    text = ""
    for k, message in enumerate(messages):
        if message["role"] == "tool":
            first = k == 0 or messages[k - 1]["role"] != "tool"
            last = k == len(messages) - 1 or messages[k + 1]["role"] != "tool"
            text += (("<|im_start|>user" if first else "") + "\n<tool_response>\n" + message["content"]
                     + "\n</tool_response>" + ("<|im_end|>\n" if last else ""))
        else:
            text += chatml_message(message)
    return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def generated(message: dict) -> str:
    """What the model samples for an assistant message: the template's body of it and the EOS
    ``<|im_end|>`` (vLLM keeps the stop token in ``token_ids``), no trailing newline."""
    return chatml_message(message)[len("<|im_start|>assistant\n"):-1]


def decode(text: str, skip_special_tokens: bool) -> str:
    """``tokenizer.decode`` of the text's tokens: the special tokens dropped when asked."""
    if skip_special_tokens:
        for token in SPECIAL:
            text = text.replace(token, "")
    return text


def agent_loop_response(turns: list[list[dict]]) -> str:
    """The response text verl's ``ToolAgentLoop`` accumulates (agent_loop/tool_agent_loop.py): each
    generation's tokens, then each tool round ``apply_chat_template(add_messages,
    add_generation_prompt=True, remove_system_prompt=True)``. ``turns``: [assistant message] or
    [tool message, ...] in order."""
    text = ""
    for group in turns:
        if group[0]["role"] == "assistant":
            text += generated(group[0])
        else:
            text += chatml(group, add_generation_prompt=True)
    return text


# -- verl ----------------------------------------------------------------------------------


def verl_dump(dump_path: Path, global_steps: int, inputs, outputs, gts, scores, reward_extra_infos_dict) -> Path:
    """``RayPPOTrainer._dump_generations`` (verl/trainer/ppo/ray_trainer.py), line for line."""
    import os

    os.makedirs(dump_path, exist_ok=True)
    filename = os.path.join(dump_path, f"{global_steps}.jsonl")
    n = len(inputs)
    base_data = {"input": inputs, "output": outputs, "gts": gts, "score": scores, "step": [global_steps] * n}
    for k, v in reward_extra_infos_dict.items():
        if len(v) == n:
            base_data[k] = v
    lines = []
    for i in range(n):
        entry = {k: v[i] for k, v in base_data.items()}
        lines.append(json.dumps(entry, ensure_ascii=False))
    with open(filename, "w") as f:
        f.write("\n".join(lines) + "\n")
    return Path(filename)


def verl_sample(question: str, rounds: list[list[dict]]) -> tuple[str, str]:
    """(input, output) of one agent-loop trajectory as ``_log_rollout_data`` decodes them
    (``batch_decode(..., skip_special_tokens=True)``)."""
    prompt = chatml([{"role": "system", "content": "You are a helpful assistant."},
                     {"role": "user", "content": question}], add_generation_prompt=True)
    return decode(prompt, True), decode(agent_loop_response(rounds), True)


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


# -- SkyRL ---------------------------------------------------------------------------------

SKYRL_BASE = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "I am a user."}]


def skyrl_response(rounds: list[list[dict]]) -> str:
    """The response SkyRL's ``SkyRLGymGenerator`` builds (generators/skyrl_gym_generator.py), as text:
    each generation's tokens (ending in the EOS ``<|im_end|>``), then each observation's ids by the
    fixed-base approach: ``apply_chat_template(base_conversation + observation,
    add_generation_prompt=True)`` minus the base conversation up to its last EOS."""
    base = chatml(SKYRL_BASE)
    base = base[:base.rindex("<|im_end|>") + len("<|im_end|>")]
    text = ""
    for group in rounds:
        if group[0]["role"] == "assistant":
            text += generated(group[0])
        else:
            text += chatml(SKYRL_BASE + group, add_generation_prompt=True)[len(base):]
    return text


def skyrl_prompt(question: str) -> str:
    return chatml([{"role": "system", "content": "Answer with tools."}, {"role": "user", "content": question}],
                  add_generation_prompt=True)


def sanitize_data_source(data_source: str) -> str:
    """``trainer_utils.sanitize_data_source``."""
    if data_source is None:
        return "unknown"
    return data_source.replace("/", "_")


def skyrl_dump_evals(export_path: Path, global_step: int | None, concat_generator_outputs: dict,
                     concat_data_sources: list, concat_all_envs: list, concat_env_extras: list,
                     eval_metrics: dict) -> Path:
    """``evaluate``'s folder and ``trainer_utils.dump_per_dataset_eval_results``, line for line; the
    tokenizer's ``decode`` (special tokens kept) is the identity on the texts given as ids."""
    dump_dir_path = (Path(export_path) / "dumped_evals"
                     / ("eval_only" if global_step is None else f"global_step_{global_step}_evals"))
    dump_dir_path.mkdir(parents=True, exist_ok=True)
    input_prompts = list(concat_generator_outputs["prompt_token_ids"])
    output_responses = list(concat_generator_outputs["response_ids"])
    data_source_indices = {}
    for i, data_source in enumerate(concat_data_sources):
        if data_source is None:
            data_source = "unknown"
        if data_source not in data_source_indices:
            data_source_indices[data_source] = []
        data_source_indices[data_source].append(i)
    for data_source, indices in data_source_indices.items():
        filename = dump_dir_path / f"{sanitize_data_source(data_source)}.jsonl"
        with open(filename, "w") as f:
            for i in indices:
                entry = {
                    "input_prompt": input_prompts[i],
                    "output_response": output_responses[i],
                    "score": concat_generator_outputs["rewards"][i],
                    "stop_reason": concat_generator_outputs.get("stop_reasons", [None] * len(input_prompts))[i],
                    "env_class": concat_all_envs[i],
                    "env_extras": concat_env_extras[i],
                    "data_source": data_source,
                }
                f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    with open(dump_dir_path / "aggregated_results.jsonl", "w") as f:
        f.write(json.dumps(eval_metrics, ensure_ascii=False) + "\n")
    return dump_dir_path


def skyrl_dump_data(export_path: Path, file_name: str) -> Path:
    """``RayPPOTrainer.dump_data``: ``TrainingInputBatch.save`` pickles the batch (here a stand-in
    object pickled the same way: the board must never unpickle it)."""
    import pickle

    data_save_dir = Path(export_path) / "dumped_data"
    data_save_dir.mkdir(parents=True, exist_ok=True)
    path = data_save_dir / f"{file_name}.pkl"
    with open(path, "wb") as f:
        pickle.dump({"sequences": [[1, 2, 3]], "note": "TrainingInputBatch"}, f)
    return path
