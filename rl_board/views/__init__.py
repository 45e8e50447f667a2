"""The page's areas, one module each: the only package that imports Streamlit. A view reads the
run through ``state`` (the one place that touches ``st.cache_*`` and, with ``clicks`` for the tables'
clicks, ``st.session_state``), calls
one function of ``analysis`` and draws.

May import ``base`` and ``analysis``; nothing of ``store``, ``readers``, ``scalars``, ``derive`` or ``cli``:
what is not a ``Run`` (the runs under a root, a folder's diagnosis, scalars, tags, the tokenizer, the
workers) is read through ``analysis.provider``."""
