"""What is computed from a sample's canonical rows as they are read, in the parsing workers: the
token metrics (``metrics``: log-ratio, KL estimators, counted positions), the tokenizer that decodes
logged token ids (``tokenizer``), and the per-sample columns kept in the segments (``samples``:
counted lengths, words, per-sample means and sums), and a step's numbers by the board's own
definition (``step_stats``: means, stds, diagnostics, GRPO group counts), the same bits in a worker and in
the parent.

May import ``base`` and ``readers``; nothing of ``store``, ``analysis``, ``views`` or ``cli``.
"""
