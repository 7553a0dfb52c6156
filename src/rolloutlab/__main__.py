"""``python -m rolloutlab`` is the ``rolloutlab`` command."""

from rolloutlab.cli import run

if __name__ == "__main__":  # ingest workers re-import the main module (spawn)
    run()
