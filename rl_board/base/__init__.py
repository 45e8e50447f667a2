"""The shared basics every layer uses: the canonical field names (``fields``), the default pad and
EOS tokens and saved settings (``defaults``), text helpers (``text``), colour scales and how a token
is shown (``colors``), and which folders the board may read (``access``, the allowed roots).

Imports nothing else of ``rl_board``.
"""
