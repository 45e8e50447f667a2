"""The page's areas, one module each: the only package that imports Streamlit. A view reads the
run through ``state`` (the one place that touches ``st.cache_*`` and, with ``clicks`` for the tables'
clicks, ``st.session_state``), calls
one function of ``analysis`` and draws. May import every layer but ``cli``."""
