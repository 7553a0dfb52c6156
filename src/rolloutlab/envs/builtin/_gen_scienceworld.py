"""Write the task/variation table of ``scienceworld-v0`` (run as a module; needs Java).

``scienceworld-v0`` must list its tasks without starting a JVM (``rolloutlab env list``
runs everywhere), so the package's official train / dev / test variation split of each
task is read once from the simulator and bundled::

    python -m rolloutlab.envs.builtin._gen_scienceworld

The file records the package version it came from; the environment refuses to run with a
different version rather than serve ids that mean other variations.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[2] / "data" / "envs" / "scienceworld" / "variations.json"


def main() -> None:
    from importlib.metadata import version

    from scienceworld import ScienceWorldEnv

    env = ScienceWorldEnv()
    try:
        tasks: dict[str, dict[str, Any]] = {}
        for name in env.get_task_names():
            env.load(name, 0)
            tasks[name] = {
                "max": int(env.get_max_variations(name)),
                "train": sorted(int(v) for v in env.get_variations_train()),
                "dev": sorted(int(v) for v in env.get_variations_dev()),
                "test": sorted(int(v) for v in env.get_variations_test()),
            }
    finally:
        env.close()
    OUT.write_text(json.dumps({"scienceworld": version("scienceworld"), "tasks": tasks}, sort_keys=True) + "\n")
    print(f"wrote {OUT}: {len(tasks)} tasks, {sum(t['max'] for t in tasks.values())} variations")


if __name__ == "__main__":
    main()
