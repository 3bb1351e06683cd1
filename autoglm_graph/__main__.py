"""``python -m autoglm_graph``: the ``autoglm-graph`` command line."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
