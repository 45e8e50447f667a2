"""Where a run's rows come from and are kept: which files a run has and how far each was read
(``tracking``), the parsing workers (``workers``, ``ingest``), the parsed segments and their
columnar cache (``segments``, ``cache``), kept command outputs (``memo``), tags and notes (``tags``),
and ``loader.RunSource``, which reads a run folder incrementally.

May import ``base``, ``readers``, ``scalars`` and ``derive``; nothing of ``analysis``, ``views`` or
``cli`` (the snapshot a refresh returns is built by ``analysis``).
"""
