"""The page's areas, one module each. Only this package imports Streamlit."""
