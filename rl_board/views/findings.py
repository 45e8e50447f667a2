"""The Findings panel at the top of the page: one line per finding (``findings.compute_findings``),
most worrying first, each with how much and since when under it, and a button that opens its evidence
(a small table of its numbers and phrases, its samples with the phrases marked) and moves the batch
below to that step. Messages hold phrases from the logs: they are shown as plain text."""

from __future__ import annotations

import streamlit as st

from ..analysis.findings import compute_evidence, compute_evidence_tables
from ..analysis.run import Run
from . import background, keys, state

#: How each check reads in the quiet line.
CHECK_NAMES = {
    "reward_with_spreading_phrases": "reward hacking phrases",
    "length_growth_with_reward": "length growth",
    "entropy_collapse": "entropy collapse",
    "training_inference_mismatch": "sampler mismatch",
    "dead_groups": "dead GRPO groups",
    "empty_responses": "empty responses",
    "component_with_spreading_phrases": "reward component hacking phrases",
    "kl_runaway": "KL runaway",
    "repetition_with_reward": "repetition with reward",
    "critic_cannot_fit": "critic fit",
    "tool_use_collapse": "tool use collapse",
    "tool_call_loops": "tool call loops",
    "reward_tracks_field": "reward tracking a field",
    "garbled_output": "garbled output",
    "images_dropped": "images dropped before training",
    "turn_faults_rising": "turn faults rising",
    "reward_not_recomposed": "reward not recomposed",
}


def render(run: Run) -> None:
    found = background.get_findings(run, wait=background.findings_wait())
    if found is None:  # the checks of a large run are still going: the rest of the page does not wait
        _pending(run)
        return
    if not found.findings:
        ran = ", ".join(CHECK_NAMES[c.kind] for c in found.checks if c.ran) or "none"
        skipped = "; ".join(f"{CHECK_NAMES[c.kind]} ({c.note})" for c in found.checks if not c.ran)
        st.caption(f"Findings: none. Checked {ran}." + (f" Not checked: {skipped}." if skipped else ""))
        return
    st.subheader("Findings")
    names = _finding_names(found.findings)
    for name, finding in zip(names, found.findings):
        left, right = st.columns([6, 1])
        left.text(finding.message)
        left.caption(f"{finding.severity} · {finding.detail}" if finding.detail else finding.severity)
        # callbacks: they run before the batch's step picker is drawn (this panel is drawn last)
        right.button("Evidence", key=f"finding-{name}", on_click=_toggle, args=(run, name, finding))
    chosen = [(name, f) for name, f in zip(names, found.findings) if name == st.session_state.get(keys.FINDING_OPEN)]
    if chosen:
        _evidence(run, chosen[0][1], found.words_from_tokens, chosen[0][0])


def _finding_names(findings) -> list[str]:
    """What names each finding in widget keys and ``keys.FINDING_OPEN``: its kind, numbered after the first
    of a kind (one run can have several component or field findings)."""
    seen: dict[str, int] = {}
    names = []
    for finding in findings:
        seen[finding.kind] = seen.get(finding.kind, 0) + 1
        names.append(finding.kind + (f"-{seen[finding.kind]}" if seen[finding.kind] > 1 else ""))
    return names


@st.fragment(run_every=0.5)
def _pending(run: Run) -> None:
    """A line saying the checks are running, looked at twice a second: once they are done, the page is
    drawn again with them."""
    if background.get_findings(run, wait=0) is not None:
        st.rerun(scope="app")
    st.caption("Findings: checking the run…")


def _toggle(run: Run, key: str, finding) -> None:
    """Open (or close) a finding's evidence; opening moves the batch to its first sample or step (the
    evidence stays in view: its Open buttons go to the batch)."""
    opened = st.session_state.get(keys.FINDING_OPEN) != key
    st.session_state[keys.FINDING_OPEN] = key if opened else None
    if opened and finding.focus_step is not None:
        if finding.labels:
            first = finding.labels[0]
            state.open_sample(int(run._samples.at[first, "step"]), first, show=False)
        else:
            state.go_to_step(finding.focus_step, run.steps.index, show=False)


def _open_step(step: int, steps) -> None:
    """A finding's step opened in the batch, with what drives it shown (no toggle to find first)."""
    state.go_to_step(step, steps)
    state.show_drivers()


def _open_sample(step: int, label) -> None:
    """A finding's sample opened in the batch, with what drives its step shown."""
    state.open_sample(step, label)
    state.show_drivers()


def _evidence(run: Run, finding, words_from_tokens: bool, key: str) -> None:
    with st.container(border=True):
        steps = (f"step {finding.first_step}" if finding.first_step == finding.last_step
                 else f"steps {finding.first_step} to {finding.last_step}")
        since = f" · since step {finding.onset_step}" if finding.onset_step is not None else ""
        st.text(f"{finding.kind} · {steps}{since}")
        for table in compute_evidence_tables(finding, words_from_tokens):
            st.table(table.set_index(table.columns[0]))
        if not finding.labels:
            st.button(f"Show step {finding.focus_step} in the batch", key=f"finding-step-{key}",
                      on_click=_open_step, args=(finding.focus_step, run.steps.index))
            return
        for i, item in enumerate(compute_evidence(run, finding)):
            left, right = st.columns([6, 1])
            left.text(f"step {item.step} · {item.sample_id} · reward {item.reward:.4g}")
            right.button("Open", key=f"finding-sample-{key}-{i}", on_click=_open_sample,
                         args=(item.step, item.label))
            st.html(item.html)

