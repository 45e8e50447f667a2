"""The shared basics every layer uses: the canonical field names (``fields``), the default pad and
EOS tokens and saved settings (``defaults``), text helpers (``text``), colour scales and how a token
is shown (``colors``), which folders the board may read (``access``, the allowed roots), where a run
lives (``location``: the door every layer reads a run through), runs at URLs (``remote``) and
compressed logs (``compression``).

Imports nothing else of ``rl_board``.
"""
