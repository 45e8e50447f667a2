"""The numbers a person reads, computed from a loaded run without Streamlit: the run snapshot and
its queries (``run``), step tables (``tables``), what drives a step (``drivers``), token positions
(``positions``), findings, search, prompts across steps, transcripts, the headless summary, the
load-time checks (``checks``), the plotly figures (``figures``), the shared HTML report (``report``) and one
sample by its address as JSON (``address``); and ``provider``, the one door through which the page
and the commands reach what is not a ``Run`` (runs under a root, scalars, tags, caches, the tokenizer).

May import ``base``, ``readers``, ``scalars``, ``derive`` and ``store``; nothing of ``views`` or ``cli``.
"""
