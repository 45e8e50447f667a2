"""Tags and notes on samples: the editor under the open sample, and the list of every tagged sample
(filter by tag, click one to open it, download them as a JSONL eval set). Kept by ``rl_board.store.tags``."""

from __future__ import annotations

from functools import partial

import streamlit as st

from ..analysis.provider import ANY_TAG, SUGGESTED_TAGS, TagConflict, TagsError, set_tags, tags_path
from ..analysis.run import Run
from ..analysis.tables import build_batch_table, cut_cells
from ..analysis.tagged import CHANGED, Tagged, add_tag_columns, build_eval_set, new_entry, sample_key
from ..base import fields as F
from ..base.text import alert_body, escape_markdown
from . import clicks, keys, state
from .sidebar import Settings

_FLASH = "tags_flash"  # (kind, message[, detail]) of the last save, shown once when the page is drawn again
_SHOWN = "tags_shown:"  # + FILE:LINE: the entry the editor was filled from (what a save may replace)


def tagged(run: Run) -> Tagged | None:
    """The run's tags, or None (with the reason shown) when its tags file can't be read."""
    got = state.get_tagged(run)
    if isinstance(got, TagsError):
        st.warning("Can't show this run's tags.")
        st.text(str(got))
        return None
    return got


def with_tags(run: Run, frame):
    """``frame`` (rows of ``run._samples``) with ``tags`` and ``note`` columns where any row is tagged."""
    got = state.get_tagged(run)
    return add_tag_columns(frame, None if isinstance(got, TagsError) else got)


def _content(entry) -> tuple:
    return (tuple(entry.tags), entry.note) if entry is not None else ((), "")


def _untouched_but_stale(shown, stored, tags: list, note: str) -> bool:
    """Whether the editor still holds what it was filled with (``shown``) while the file now holds
    something else (``stored``, saved by another session): then it is filled again."""
    return _content(shown) != _content(stored) and (tuple(tags), note) == _content(shown)


def render_editor(run: Run, label) -> None:
    """Tags and a note for sample ``label``, saved as soon as either changes; kept for everyone who
    opens this run."""
    if flash := st.session_state.pop(_FLASH, None):
        {"success": st.success, "error": st.error}.get(flash[0], st.warning)(
            flash[1] if len(flash) < 3 else alert_body(flash[1], flash[2]))
    book = tagged(run)
    if book is None:
        return
    key = sample_key(run, label)
    stored = entry = book.entries.get(key)
    if stored is not None and any(e.key == key and why == CHANGED for e, why in book.missing):
        st.caption("This line had tags for another sample before its file was rewritten (shown empty here; a "
                   "change replaces them): " + escape_markdown(", ".join(stored.tags) or "a note"))
        entry = None
    tags_key, note_key, shown_key = f"{keys.TAGS}:{key}", f"{keys.NOTE}:{key}", _SHOWN + key
    if (shown_key not in st.session_state or tags_key not in st.session_state
            or _untouched_but_stale(st.session_state[shown_key], stored, st.session_state[tags_key],
                                    st.session_state.get(note_key, ""))):  # fill the editor from the file
        st.session_state[shown_key] = stored
        st.session_state[tags_key] = list(entry.tags) if entry else []
        st.session_state[note_key] = entry.note if entry else ""
    offered = list(dict.fromkeys([*SUGGESTED_TAGS, *book.names(), *st.session_state[tags_key]]))
    left, right = st.columns([1, 2])
    save = dict(on_change=_save, args=(run, label, key))
    where = ("Kept in " + escape_markdown(str(tags_path(run.path))) + " (beside the cache, never in your logs; "
             "`RL_BOARD_TAGS_DIR` moves it).")
    left.multiselect("Tags", offered, key=tags_key, accept_new_options=True, **save,
                     help="Pick or type tags (no commas); saved at once, for everyone who opens this run. " + where)
    right.text_area("Note", key=note_key, height=68, max_chars=10_000, **save,
                    help="Saved when you leave the box (or press Ctrl+Enter). " + where)


def _save(run: Run, label, key: str) -> None:
    """Store the editor's tags and note of sample ``key`` (a callback: it runs before the page is drawn
    again, which then shows the outcome)."""
    tags_key, note_key, shown_key = f"{keys.TAGS}:{key}", f"{keys.NOTE}:{key}", _SHOWN + key
    chosen, note = st.session_state.get(tags_key, []), st.session_state.get(note_key, "")
    shown = st.session_state.get(shown_key)
    try:
        saved = set_tags(run.path, new_entry(run, label, chosen, note), shown=shown)
    except TagConflict as exc:
        now = exc.current
        st.session_state.pop(shown_key, None)  # the editor is filled from the file again: theirs
        st.session_state[_FLASH] = ("warning", "Not saved: another session changed this sample's tags or note since "
                                               "they were shown. The editor now shows theirs; yours were:",
                                    f"tags: {', '.join(chosen)}\nnote: {note}\n\nnow: "
                                    f"{', '.join(now.tags) if now else '(none)'}; {now.note if now else ''}")
    except TagsError as exc:  # a tag with a comma, a tags file that can't be written: the editor keeps them
        st.session_state[_FLASH] = ("error", "Can't save these tags.", str(exc))
    else:
        st.session_state[shown_key] = saved  # what the file holds now: the next change is checked against it
        st.session_state[_FLASH] = ("success", "Saved.")


def render_list(run: Run, settings: Settings) -> None:
    """Every tagged sample of the run: filter by tag, click one to open it, download them."""
    if not st.toggle("Tagged samples", key=keys.SHOW_TAGGED,
                     help="The samples you and others tagged (reward hack, good, …) or wrote a note on."):
        return
    book = tagged(run)
    if book is None:
        return
    st.caption("Kept in " + escape_markdown(str(tags_path(run.path))) + " (beside the cache, never in your logs).")
    if book.missing:
        st.caption(f"{len(book.missing)} tagged line{' is' if len(book.missing) == 1 else 's are'} shown on no "
                   "sample:")
        st.dataframe([{"sample": e.key, "step": e.step, "tags": ", ".join(e.tags), "note": e.note, "why": why}
                      for e, why in book.missing], hide_index=True, key="tags_missing")
    if book.frame.empty:
        st.info("No sample of this run is tagged yet: tag one under its sample view.")
        return
    names = book.names()
    tag = st.selectbox("With tag", [ANY_TAG, *names], key=keys.TAGGED_FILTER,
                       format_func=lambda t: "(any tag or note)" if t == ANY_TAG else t)
    labels = book.labels_with(tag)
    rows = run.with_text(run._samples.loc[labels])
    table = build_batch_table(add_tag_columns(rows, book), settings.system_marker, settings.pad_token,
                              settings.kl_estimator)
    table.insert(0, F.STEP, rows[F.STEP])
    st.caption(f"{len(labels):,} tagged sample{'' if len(labels) == 1 else 's'}"
               + ("" if tag == ANY_TAG else " with this tag") + ". Click one to open it in Batch and sample.")
    key = f"tagged_table-{tag}-{len(labels)}"
    event = st.dataframe(cut_cells(table), hide_index=True, on_select="rerun", selection_mode=clicks.ROW_CLICK,
                         key=key)
    clicked = clicks.row_clicked(key, event.selection)
    if clicked is not None and clicked < len(labels):
        label = labels[clicked]
        state.open_sample(int(run._samples.at[label, F.STEP]), label)
    st.download_button("Download as a JSONL eval set", partial(build_eval_set, run, book, settings.pad_token, tag),
                       file_name=f"{run.path.name}-tagged.jsonl", mime="application/jsonl", key="tagged_jsonl",
                       on_click="ignore", help="One line per sample: prompt, response, reward, tags, note, and "
                                               "where it came from (run, step, file, line, ground truth).")


def render_sample(run: Run, picked, settings: Settings) -> None:
    """The editor right below the sample's texts, above its tokens (a view of ``main.SAMPLE_VIEWS``;
    ``picked``: the batch's choice): two boxes, no heading, so the tokens stay in view."""
    if settings.show_pair:
        render_editor(run, picked.label)
