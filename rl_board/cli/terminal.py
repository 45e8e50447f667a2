"""What the commands print is data, not terminal control: a file or folder name (or a sample's text)
holding ESC, another control character or a bidirectional override is written with that character
escaped (``\\x1b``, ``\\u009b``, ``\\u202e``), so a name can't move the cursor, retitle the window or rewrite what
the user reads. Tabs and line ends are kept; JSON output is already escaped by its encoder."""

from __future__ import annotations

import contextlib
import re
import sys

#: C0 controls but tab and line feed, DEL, the C1 controls, a carriage return that ends no line, and
#: the bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069)
_UNSAFE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|\r(?!\n|\Z)")


def escaped(text: str) -> str:
    """``text`` with every character that could steer a terminal written as its escape: ``\\xNN`` for a
    C0 control (which JSON output never holds raw), ``\\uNNNN`` for the others, so ``--json`` output
    stays valid JSON that decodes to the name as it is."""
    return _UNSAFE.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x20 else f"\\u{ord(m[0]):04x}", text)


class EscapingStream:
    """A text stream that writes through ``escaped``; everything else is the wrapped stream's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(escaped(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def escaping_output():
    """``sys.stdout`` and ``sys.stderr`` escaped while the block runs, as they were afterwards."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = EscapingStream(out), EscapingStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
