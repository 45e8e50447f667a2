"""The format readers: one module per trainer's (or writer's) files, each a ``base.Reader`` the registry
lists (``readers.signatures.BUILTIN``). What they share (lines, records to rows, turns, layouts, notes) is
in the ``readers`` package beside this folder."""
