"""The published JSON Schema of the run directory's files (``docs/run-format.schema.json``).

``python -m rolloutlab.schema._jsonschema`` rewrites the file; a test checks that it matches.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic.json_schema import models_json_schema

from rolloutlab.schema._records import FORMAT_VERSION, EvalSummary, MetricsRecord, Run, Trajectory


def run_format_schema() -> dict[str, Any]:
    _, defs = models_json_schema(
        [(m, "validation") for m in (Run, MetricsRecord, Trajectory, EvalSummary)], ref_template="#/$defs/{model}"
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"rolloutlab run directory, format {FORMAT_VERSION}",
        "description": (
            "run.json is a Run; each line of metrics.jsonl is a MetricsRecord; each line of "
            "rollouts/step_NNNNNN.jsonl and eval/<checkpoint>/episodes.jsonl is a Trajectory; "
            "eval/<checkpoint>/summary.json is an EvalSummary."
        ),
        "$defs": defs["$defs"],
    }


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/run-format.schema.json")
    out.write_text(json.dumps(run_format_schema(), indent=2, sort_keys=True) + "\n")
    print(out)
