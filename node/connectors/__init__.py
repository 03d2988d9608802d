"""How rows enter and leave the system: source files (CSV, JSON Lines) and
synthetic generators with their rate schedules (``sources``), replay at a
speed (``replay_clock``), and the JSON Lines of sinks (``jsonl``)."""
