"""A whole cluster on this machine (``semiactive cluster up``): ports,
processes and their supervision (``cluster``, ``ports``, ``supervision``),
faults the launcher injects (``faults``), network namespaces for loaded
links (``netlab``), what a run measured (``measurements``) and how it
ended (``outcome``), its ``manifest.json``, and ``semiactive demo``."""
