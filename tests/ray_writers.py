"""Runs of the Ray-era trainers, written the way each trainer's own writer code writes them.

Each function follows its writer where it shapes the bytes (the source is named in its
docstring); only the objects being written (a trajectory's turns, rewards) are built by hand.
The chat template is Qwen2.5's ChatML (its ``tokenizer_config.json`` ``chat_template``), the
one these trainers' agent examples use.
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIAL = ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>")


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


#: The markers a tokenizer that flags only its end markers special drops with ``skip_special_tokens``
#: (ChatML's ``<|im_start|>`` an added token that is not special, as in several Hermes fine-tunes).
CHATML_END_MARKERS = ("<|im_end|>", "<|endoftext|>")


def openrlhf_sample0(messages: list[dict], dropped=CHATML_END_MARKERS, render=None) -> str:
    """``PPOTrainer.train_step``'s ``sample0[0]``: the first experience's whole sequence (prompt and
    response) ``tokenizer.decode(..., skip_special_tokens=True)``: the chat template's text of
    ``messages`` (``render``, ChatML by default) with the tokenizer's special tokens (``dropped``) gone."""
    text = (render or chatml)(messages)
    for token in dropped:
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


def qwen_vl_prompt(question: str, pads: list[int]) -> str:
    """A geo3k prompt as Qwen2.5-VL's processor renders it for the rollout (add_generation_prompt): the system
    message, then the user turn with one ``<|vision_start|><|image_pad|><|vision_end|>`` per image before its
    text (verl's ``RLHFDataset`` turns the dataset's ``<image>`` into an image part), each ``<|image_pad|>``
    expanded to the image's patch count (``pads``) by the processor."""
    vision = "".join("<|vision_start|>" + "<|image_pad|>" * n + "<|vision_end|>" for n in pads)
    return ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            f"<|im_start|>user\n{vision}{question}<|im_end|>\n<|im_start|>assistant\n")


def verl_vlm_sample(question: str, pads: list[int], answer: str, skip_special_tokens: bool = True) -> tuple[str, str]:
    """(input, output) of one geo3k rollout as ``_log_rollout_data`` decodes them: with verl's
    ``skip_special_tokens=True`` the vision runs go with the other special tokens; a dump made with False (a
    patched trainer) keeps them."""
    return (decode(qwen_vl_prompt(question, pads), skip_special_tokens),
            decode(answer + "<|im_end|>", skip_special_tokens))


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


# -- ROLL ----------------------------------------------------------------------------------


def roll_remove_nan_items(data: dict) -> dict:
    """``roll/pipeline/agentic/utils.remove_nan_items``: drop every row where any column is None."""
    import numpy as np

    if not data:
        return {}
    arr = np.vstack([np.asarray(v, dtype=object) for v in data.values()])
    mask = arr != None
    valid_row_mask = mask.all(axis=0)
    return {k: np.asarray(v, dtype=object)[valid_row_mask] for k, v in data.items()}


def roll_write_to_json_process(path, data, columns_configs):
    """``roll/pipeline/rlvr/utils.write_to_json_process``: the whole batch as ONE line of columns."""
    import os

    import numpy

    os.makedirs(path, exist_ok=True)
    column_names = {item[0] for item in columns_configs}
    data = {k: v.tolist() if isinstance(v, numpy.ndarray) else v for k, v in data.items() if k in column_names}
    global_step = data.get("global_step", [0])[0]
    with open(os.path.join(path, f"rollout_dump_data.step_{global_step}.jsonl"), "w", encoding="utf-8") as f:
        f.write(json.dumps(data, ensure_ascii=False) + "\n")


def roll_dump_rollout_trajectories(path, global_step, non_tensor_batch: dict, columns_config: list):
    """``roll/pipeline/agentic/utils.dump_rollout_trajectories`` (the writer process run inline)."""
    import copy

    write_data = {item[0]: non_tensor_batch.pop(item[0]) for item in columns_config if item[0] in non_tensor_batch}
    write_data = roll_remove_nan_items(copy.deepcopy(write_data))
    data_cnt = len(write_data[columns_config[0][0]])
    write_data["global_step"] = [global_step] * data_cnt
    columns_config.append(["global_step", "bigint"])
    roll_write_to_json_process(path, write_data, columns_config)


def roll_trajectory_batch(trajectories: list[dict], exp_name: str = "exp") -> tuple[dict, list]:
    """The non-tensor batch ``AgentNativeStepEnvManager.formulate_rollouts`` returns for each
    trajectory (one stepwise sample per action: only the last holds ``trajectory_data``,
    ``messages`` and ``tools``, as JSON strings), concatenated, and its ``COLUMMNS_CONFIG``.
    ``trajectories``: {"messages", "step_rewards", "tools", "num_actions", optional "last_observation"}:
    ``messages`` is the env's whole conversation after the final action. As the manager writes them,
    the ``messages`` column is the observation the last LLM call was given with that call's decoded
    answer appended (``make_decision`` appends to the cached observation), i.e. the conversation up to
    its last assistant message; ``trajectory_data.last_observation`` is the observation the env
    returned for the final action (popped from the history in ``formulate_rollouts``): the whole
    conversation for a message env, a string for ROCK's (``"SESSION_END"``), ``[]`` when none."""
    import numpy as np

    columns = {"trajectory_data": [], "messages": [], "tools": [], "exp_name": []}
    for k, t in enumerate(trajectories):
        step_rewards = t["step_rewards"]
        data = {
            "trajectory_id": f"tag_0_{len(step_rewards) - 1}_{k}_{k}_0_42_20260101_000000_000000",
            "timestamp": "20260101_000000_000000", "current_step": 0,
            "env_info": {"env_id": k, "group_id": k, "tag": "tag", "seed": 42, "episode_id": 0, "max_steps": 8,
                         "mode": "train", "sequence_length": 4096},
            "timing_info": {"traj_save_time": "2026-01-01T00:00:00", "traj_time_env_total": 1.5},
            "length_info": {"trajectory_length": t["num_actions"], "num_actions": t["num_actions"],
                            "terminated": True, "truncated": False, "response_length": 30.0},
            "reward_info": {"episode_reward": sum(step_rewards), "step_rewards": step_rewards,
                            "first_round_reward": step_rewards[0] if step_rewards else 0,
                            "final_reward": step_rewards[-1] if step_rewards else 0},
            "failure_info": {"failure_mode": "", "stop_reason": "FINISH", "error_messages": [], "test_output": "",
                             "has_failure": False, "failure_step": t["num_actions"]},
            "metrics": {"env/tag/num_actions": t["num_actions"]},
            "last_observation": t.get("last_observation", t["messages"]),
        }
        last_call = max((k for k, m in enumerate(t["messages"]) if m["role"] == "assistant"), default=-1)
        for _ in range(t["num_actions"] - 1):  # the earlier stepwise samples: None in these columns
            for name in ("trajectory_data", "messages", "tools"):
                columns[name].append(None)
            columns["exp_name"].append(exp_name)
        columns["trajectory_data"].append(json.dumps(data))
        columns["messages"].append(json.dumps([t["messages"][:last_call + 1]]))
        columns["tools"].append(json.dumps(t["tools"]))
        columns["exp_name"].append(exp_name)
    batch = {k: np.array(v, dtype=object) for k, v in columns.items()}
    config = [["trajectory_data", "string"], ["messages", "string"], ["tools", "string"], ["exp_name", "string"]]
    return batch, config


# -- AReaL ---------------------------------------------------------------------------------


class CharTokenizer:
    """A tokenizer whose ids are the text's code points (``decode`` keeps special tokens as text)."""

    @staticmethod
    def encode(text: str) -> list[int]:
        return [ord(c) for c in text]

    @staticmethod
    def decode(ids, skip_special_tokens: bool = False) -> str:
        return "".join(chr(i) for i in ids)


def areal_individual_traj(conversations: list[tuple[list[dict], list[dict], float]], version: int) -> dict:
    """The batch AReaL's ``MultiTurnWorkflow`` / agent workflows export in the default ``individual``
    style: one row per LLM call, its prompt the whole conversation before the call (ChatML with the
    generation prompt), its completion the sampled text (EOS included, loss mask 1), the
    trajectory's reward copied to every call. ``conversations``: (prompt messages, later messages
    [assistant / tool ...], reward)."""
    import numpy as np

    rows = []
    for prompt_messages, later, reward in conversations:
        history = list(prompt_messages)
        for _k, message in enumerate(later):
            if message["role"] == "assistant":
                prompt = CharTokenizer.encode(chatml(history, add_generation_prompt=True))
                completion = CharTokenizer.encode(generated(message))
                rows.append((prompt, completion, reward))
            history.append(message)
    width = max(len(p) + len(c) for p, c, _ in rows) + 3  # right padding, as the batch pads
    input_ids = np.zeros((len(rows), width), dtype=np.int64)
    loss_mask = np.zeros((len(rows), width), dtype=np.int64)
    attention_mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, (p, c, _) in enumerate(rows):
        input_ids[i, :len(p) + len(c)] = p + c
        loss_mask[i, len(p):len(p) + len(c)] = 1
        attention_mask[i, :len(p) + len(c)] = 1
    return {"input_ids": input_ids, "loss_mask": loss_mask, "attention_mask": attention_mask,
            "rewards": np.array([r for _, _, r in rows], dtype=np.float32),
            "versions": np.full((len(rows), width), version, dtype=np.int64)}


def areal_dump_trajectory(fileroot: Path, experiment: str, trial: str, traj: dict, task_id: int,
                          is_eval: bool, user: str = "areal") -> Path:
    """``WorkflowExecutor._dump_trajectory`` (areal/infra/workflow_executor.py) with
    ``StatsLogger.get_log_path``'s folder (``getpass.getuser()`` given as ``user``), line for line."""
    import os

    log_path = f"{fileroot}/logs/{user}/{experiment}/{trial}"
    dump_dir = os.path.join(log_path, "eval-rollout" if is_eval else "rollout")
    input_ids, rewards = traj["input_ids"], traj["rewards"]
    loss_mask, attention_mask = traj["loss_mask"], traj["attention_mask"]
    versions = traj["versions"].flatten().tolist()
    tail_version, head_version = max(versions), min(versions)
    version_dir = os.path.join(dump_dir, str(tail_version))
    os.makedirs(version_dir, exist_ok=True)
    file_path = os.path.join(version_dir, f"{task_id}.jsonl")
    with open(file_path, "a") as f:
        for i in range(input_ids.shape[0]):
            seqlen = attention_mask[i].sum().item()
            if seqlen == 0:
                continue
            ids = input_ids[i, :seqlen].tolist()
            mask = loss_mask[i, :seqlen].tolist()
            if mask[-1] != 1:
                continue
            prompt_end = seqlen - sum(mask)
            record = {
                "task_id": task_id, "sample_idx": i, "seqlen": seqlen, "prompt_len": prompt_end,
                "head_version": head_version, "tail_version": tail_version, "reward": rewards[i].item(),
                "prompt": CharTokenizer.decode(ids[:prompt_end], skip_special_tokens=False),
                "completion": CharTokenizer.decode(ids[prompt_end:], skip_special_tokens=False),
            }
            f.write(json.dumps(record) + "\n")
    return Path(log_path)


# -- tinker-cookbook -------------------------------------------------------------------------


def tinker_json_safe(value):
    """``rollout_logging._json_safe``."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): tinker_json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [tinker_json_safe(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def tinker_serialize(split: str, iteration: int, groups: list[dict], sampling_client_step=None) -> list[dict]:
    """``rollout_logging.serialize_rollout_summaries``: one record per trajectory. ``groups``: {"tags",
    "trajectories": [{"transitions": [{"ob_len", "ac_len", "reward", "episode_done", "metrics", "logs"}],
    "final_ob_len", "final_reward", "metrics"}]}; the total reward is the transitions' rewards plus the
    final group reward (``TrajectoryGroup.get_total_rewards``)."""
    records = []
    for group_idx, group in enumerate(groups):
        for traj_idx, t in enumerate(group["trajectories"]):
            steps = [{"step_idx": k, "ob_len": s["ob_len"], "ac_len": s["ac_len"], "reward": s["reward"],
                      "episode_done": s["episode_done"], "metrics": s["metrics"], "logs": s["logs"]}
                     for k, s in enumerate(t["transitions"])]
            total = sum(s["reward"] for s in t["transitions"]) + t["final_reward"]
            records.append(tinker_json_safe({
                "schema_version": 1, "split": split, "iteration": iteration, "group_idx": group_idx,
                "traj_idx": traj_idx, "tags": list(group["tags"]), "sampling_client_step": sampling_client_step,
                "total_reward": total, "final_reward": t["final_reward"], "trajectory_metrics": t["metrics"],
                "steps": steps, "final_ob_len": t["final_ob_len"]}))
    return records


def tinker_write_rollouts(log_path: Path, iteration: int, records: list[dict], base_name: str = "train") -> Path:
    """``TrainingRunStore.write_rollouts`` (stores/training_store.py) on local storage."""
    path = Path(log_path) / f"iteration_{iteration:06d}" / f"{base_name}_rollout_summaries.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in records]
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8") if lines else b"")
    return path


def tinker_write_logtree(log_path: Path, iteration: int, base_name: str = "train") -> None:
    """``_get_logtree_scope``'s two files: ``{base_name}.html`` and ``{base_name}_logtree.json``."""
    folder = Path(log_path) / f"iteration_{iteration:06d}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{base_name}.html").write_text("<html><body>logtree</body></html>")
    (folder / f"{base_name}_logtree.json").write_text(json.dumps({"title": "Running", "children": []}))


def tinker_write_metrics(log_path: Path, metrics: dict, step: int) -> None:
    """``TrainingRunStore.write_metrics``: ``{"step": step, **metrics}`` appended to metrics.jsonl."""
    with open(Path(log_path) / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": step, **metrics}) + "\n")


# -- Llama 3 ---------------------------------------------------------------------------------

LLAMA3_SPECIAL = ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>")
#: The start of Llama 3.1's chat_template (tokenizer_config.json), enough to tell the family.
LLAMA3_TEMPLATE = ("{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
                   "'<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}{%- endfor %}")


def llama3_message(message: dict) -> str:
    """One message as Llama 3.1's template renders it (a tool result under the ipython role; a call
    written as a Hermes block, the format verl's default tool parser reads)."""
    role = "ipython" if message["role"] == "tool" else message["role"]
    body = message.get("content") or ""
    for call in message.get("tool_calls", []):
        body += '<tool_call>{"name": "' + call["name"] + '", "arguments": ' + json.dumps(call["arguments"]) + "}</tool_call>"
    return "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + body + "<|eot_id|>"


def llama3_agent_response(rounds: list[list[dict]]) -> str:
    """verl's agent-loop response with a Llama 3 tokenizer: each generation (ending in ``<|eot_id|>``),
    then each tool round with the generation prompt."""
    text = ""
    for group in rounds:
        if group[0]["role"] == "assistant":
            text += llama3_message(group[0])[len("<|start_header_id|>assistant<|end_header_id|>\n\n"):]
        else:
            text += "".join(llama3_message(m) for m in group) + "<|start_header_id|>assistant<|end_header_id|>\n\n"
    return text


def decode_llama3(text: str) -> str:
    for token in LLAMA3_SPECIAL:
        text = text.replace(token, "")
    return text


# -- slime -----------------------------------------------------------------------------------


def slime_sample_dict(**fields) -> dict:
    """``Sample.to_dict()`` (slime/utils/types.py): every dataclass field, ``status`` as its value,
    ``spec_info`` and ``prefix_cache_info`` as dicts; ``fields`` override the defaults."""
    sample = {
        "group_index": None, "index": None, "rollout_id": None, "prompt": "", "tokens": [],
        "multimodal_inputs": None, "multimodal_train_inputs": None, "multimodal_train_input_id": None,
        "apply_chat_template_kwargs": {}, "response": "", "response_length": 0, "label": None, "reward": None,
        "loss_mask": None, "weight_versions": [], "rollout_log_probs": None, "rollout_top_p_token_ids": None,
        "rollout_top_p_token_offsets": None, "rollout_routed_experts": None, "remove_sample": False,
        "teacher_log_probs": None, "status": "pending", "metadata": {}, "generate_function_path": None,
        "custom_rm_path": None, "train_metadata": None, "session_id": None, "non_generation_time": 0.0,
        "spec_info": {"spec_accept_token_num": 0, "spec_draft_token_num": 0, "spec_verify_ct": 0,
                      "completion_token_num": 0},
        "prefix_cache_info": {"cached_tokens": 0, "total_prompt_tokens": 0},
    }
    sample.update(fields)
    return sample


def slime_save_debug_rollout_data(path_template: str, data, *, rollout_id: int, evaluation: bool) -> Path:
    """``save_debug_rollout_data`` (slime/observability/rollout_data_utils.py) with samples already
    ``to_dict()``-ed: ``torch.save({"rollout_id", "samples"}, path)``; an eval's data is
    ``{dataset: {"samples": [...]}}``, flattened. ``--dump-details DIR`` makes the template
    ``DIR/rollout_data/{rollout_id}.pt``."""
    import torch

    path = Path(path_template.format(rollout_id=("eval_" if evaluation else "") + str(rollout_id)))
    path.parent.mkdir(parents=True, exist_ok=True)
    samples = [s for info in data.values() for s in info["samples"]] if evaluation else list(data)
    torch.save({"rollout_id": rollout_id, "samples": samples}, path)
    return path


# -- samples logged to W&B -------------------------------------------------------------------


class WandbRun:
    """The part of a local wandb run that logs tables: ``wandb.log`` advances the history step by one;
    a ``Table`` value is written as ``Table.bind_to_run`` / ``Media.bind_to_run`` do
    (``json.dump({"columns", "data"})``, named ``{key}_{step}_{sha256[:20]}.table.json`` under
    ``files/media/table``, the key's ``/`` making sub-folders)."""

    def __init__(self, wandb_dir: Path, run_id: str = "abc123", offline: bool = False):
        self.dir = Path(wandb_dir) / f"{'offline-run' if offline else 'run'}-20260101_000000-{run_id}"
        (self.dir / "files").mkdir(parents=True, exist_ok=True)
        self.step = 0

    def log(self, values: dict) -> None:
        import hashlib

        for key, value in values.items():
            if isinstance(value, WandbTable):
                text = json.dumps({"columns": value.columns, "data": value.data})
                digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]
                path = self.dir / "files" / "media" / "table" / f"{key}_{self.step}_{digest}.table.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
        self.step += 1


class WandbTable:
    def __init__(self, columns, data=None):
        self.columns = list(columns)
        self.data = [list(r) for r in data or []]

    def add_data(self, *row):
        self.data.append(list(row))


class OpenRLHFWandbLogger:
    """``openrlhf/utils/logging_utils.WandbLogger.log_train``: the samples table (global_step, text,
    reward) copied with every earlier row, one row added, logged; then the metrics in a second log."""

    def __init__(self, run: WandbRun):
        self.handle = run
        self.samples_table = WandbTable(columns=["global_step", "text", "reward"])

    def log_train(self, global_step: int, logs_dict: dict) -> None:
        logs_dict = dict(logs_dict)
        generated_samples = logs_dict.pop("generated_samples", None)
        if generated_samples:
            new_table = WandbTable(columns=self.samples_table.columns, data=self.samples_table.data)
            new_table.add_data(global_step, *generated_samples)
            self.samples_table = new_table
            self.handle.log({"train/generated_samples": new_table})
        metrics = {k: v for k, v in logs_dict.items() if v is not None}
        self.handle.log({"train/%s" % k: v for k, v in {**metrics, "global_step": global_step}.items()})


# -- samples logged to TensorBoard -----------------------------------------------------------


class TextSummaryWriter:
    """``torch.utils.tensorboard.SummaryWriter.add_text`` / ``add_scalar`` without torch: the same
    protos (``torch/utils/tensorboard/summary.py``'s ``text``: a string tensor of shape [1] with the
    ``text`` plugin's metadata) through tensorboard's own ``EventFileWriter``."""

    def __init__(self, log_dir: Path):
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        Path(log_dir).mkdir(parents=True, exist_ok=True)
        self.writer = EventFileWriter(str(log_dir))

    def _add(self, value, step: int) -> None:
        import time

        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        self.writer.add_event(Event(summary=Summary(value=[value]), step=step, wall_time=time.time()))

    def add_text(self, tag: str, text_string: str, global_step: int) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
        from tensorboard.compat.proto.tensor_pb2 import TensorProto
        from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
        from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData

        plugin_data = SummaryMetadata.PluginData(plugin_name="text", content=TextPluginData(version=0).SerializeToString())
        tensor = TensorProto(dtype="DT_STRING", string_val=[text_string.encode("utf_8")],
                             tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
        self._add(Summary.Value(tag=tag + "/text_summary", metadata=SummaryMetadata(plugin_data=plugin_data),
                                tensor=tensor), global_step)

    def add_scalar(self, tag: str, value: float, global_step: int) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._add(Summary.Value(tag=tag, simple_value=value), global_step)

    def close(self) -> None:
        self.writer.close()


def openrlhf_tensorboard_log_train(writer: TextSummaryWriter, global_step: int, logs_dict: dict) -> None:
    """``openrlhf/utils/logging_utils.TensorboardLogger.log_train``: the sample as
    ``f"Sample:\\\\n{text}\\\\n\\\\nReward: {reward:.4f}"`` (a backslash and an n, as written)."""
    generated_samples = logs_dict.get("generated_samples")
    for k, v in logs_dict.items():
        if k == "generated_samples" and v is not None:
            text, reward = generated_samples
            formatted_text = f"Sample:\\n{text}\\n\\nReward: {reward:.4f}"
            writer.add_text("train/generated_samples", formatted_text, global_step)
        elif v is not None:
            writer.add_scalar(f"train/{k}", v, global_step)


def verl_log_generations_to_wandb(logger_state: dict, run: WandbRun, samples: list, step: int) -> None:
    """``verl/utils/tracking.py``'s ``_log_generations_to_wandb``: one wide row per step (``step``,
    ``input_i``, ``output_i``, ``score_i``), the table copied with every earlier row, logged at ``step``."""
    columns = ["step"] + sum([[f"input_{i + 1}", f"output_{i + 1}", f"score_{i + 1}"] for i in range(len(samples))], [])
    if "validation_table" not in logger_state:
        logger_state["validation_table"] = WandbTable(columns=columns)
    new_table = WandbTable(columns=columns, data=logger_state["validation_table"].data)
    row_data = [step]
    for sample in samples:
        row_data.extend(sample)
    new_table.add_data(*row_data)
    run.step = step  # wandb.log(..., step=step)
    run.log({"val/generations": new_table})
    logger_state["validation_table"] = new_table
