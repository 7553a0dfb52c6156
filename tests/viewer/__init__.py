"""Stores for the viewer tests: a multi-turn agent run carrying hostile text, and helpers.

``make_agent_run`` writes a rolloutlab run directory (4 steps × 3 groups × 4 samples, 2–4
turns each with tool calls, per-turn rewards, invalid actions, ungraded failures).  One
trajectory (``HOSTILE_TRAJ``) carries the XSS payloads in every text field; another has a
10 MB observation (``BIG_TRAJ``); a third has a hostile traj id, group id and task id.
The run's model and its label (given at ingest) are hostile too.  A second run (a verl dump) has a hostile name.
"""

from __future__ import annotations

from pathlib import Path

import rolloutlab
from rolloutlab.io import RunWriter
from rolloutlab.schema import Run, ToolCall, Trajectory, Turn
from tests._verl import write_verl

PAYLOADS = (
    "<script>window.__xss=1</script>",
    '<img src=x onerror="window.__xss=1">',
    '"><svg onload="window.__xss=1"></svg>',
    "javascript:window.__xss=1",
    '<a href="javascript:window.__xss=1">click me</a>',
    "</pre></details></main><script>window.__xss=1</script>",
    "{{ 7 * 7 }} {% raw %}",
    "\x1b[31mred\x1b[0m \u202edesrever",
)
XSS = "\n".join(PAYLOADS)
"""Every payload, one a line: put into every text field of the hostile trajectory."""

HOSTILE_ID = '<img src=x onerror="window.__xss=1">'
HOSTILE_TRAJ = "s2-g0-0"
BIG_TRAJ = "s3-g1-2"
BIG_OBS = 10 * 1024 * 1024
RUN = "agent"
VERL_NAME = '<img src=x onerror="window.__xss=1"> verl'
STEPS = (1, 2, 3, 4)


def _traj(step: int, g: int, i: int, n_steps: int = len(STEPS)) -> Trajectory:
    task = f"task-{(g + step) % 5}"
    p = (step / n_steps) * (0.4 + 0.2 * g)
    ok = ((i * 37 + g * 11 + step * 7) % 100) / 100 < p
    ungraded = step == 2 and g == 2 and i == 3
    n_turns = 2 + (i + g) % 3
    turns = [
        Turn(turn_idx=k, observation=f"[{task}] room {k}: a door, a key and a note",
             anchor_obs=f"room {k}", thought=f"I should try action {k}", action=f"search[key {k}]",
             parsed_action=f"search(key={k})",
             tool_calls=[ToolCall(name="search", arguments=f'{{"q": "key {k}"}}', id=f"call-{k}",
                                  result=f"found {k} results")],
             action_valid=(k + i) % 4 != 3, reward=0.1 * k, done=k == n_turns - 1, tokens=12 + k)
        for k in range(n_turns)
    ]
    return Trajectory(
        traj_id=f"s{step}-g{g}-{i}", step=step, group_id=f"{step}:g{g}", sample_idx=i, task_id=task,
        prompt=[{"role": "system", "content": "You are an agent."}, {"role": "user", "content": f"Solve {task}."}],
        response=f"final answer for {task}: {'correct' if ok else 'wrong'}",
        reward=None if ungraded else float(ok), graded=not ungraded, success=None if ungraded else ok,
        termination="error" if ungraded else ("done" if ok else "max_turns"),
        error="grader timed out" if ungraded else None,
        num_turns=n_turns, tool_calls=n_turns, invalid_actions=sum(1 for t in turns if not t.action_valid),
        response_tokens=sum(t.tokens or 0 for t in turns), turns=turns,
    )


def _hostile(t: Trajectory) -> Trajectory:
    turns = [
        Turn(turn_idx=0, observation=XSS, anchor_obs=XSS, thought=XSS, action=XSS, parsed_action=XSS + " parsed",
             tool_calls=[ToolCall(name=HOSTILE_ID, arguments=XSS, id=HOSTILE_ID, result=XSS)],
             action_valid=False, reward=-1.0, tokens=3),
    ]
    return t.model_copy(update={
        "prompt": [{"role": HOSTILE_ID, "content": XSS}], "response": XSS, "error": None, "turns": turns,
        "extras": {"note": XSS, HOSTILE_ID: 1}, "reward_components": {HOSTILE_ID: 0.5}, "num_turns": 1,
        "data_source": HOSTILE_ID,
    })


def step_trajectories(step: int) -> list[Trajectory]:
    out = [_traj(step, g, i) for g in range(3) for i in range(4)]
    for k, t in enumerate(out):
        if t.traj_id == HOSTILE_TRAJ:
            out[k] = _hostile(t)
        elif t.traj_id == BIG_TRAJ:
            turns = list(t.turns)
            turns[0] = turns[0].model_copy(update={"observation": ("x" * 99 + "\n") * (BIG_OBS // 100)})
            out[k] = t.model_copy(update={"turns": turns})
    if step == 4:  # hostile ids
        out.append(_traj(step, 9, 0).model_copy(update={"traj_id": HOSTILE_ID, "group_id": HOSTILE_ID,
                                                        "task_id": HOSTILE_ID}))
    return out


def make_agent_run(dest: Path, steps: tuple[int, ...] = STEPS, *, status: str = "running") -> Path:
    """The agent run directory at ``dest`` with ``steps`` written (add more later with
    :func:`add_step`)."""
    run = Run(run_id=RUN, name=RUN, algorithm="grpo", env="toy-rooms", model=HOSTILE_ID)
    w = RunWriter(dest, run)
    for s in steps:
        add_step(w, s)
    w.run.status = status  # type: ignore[assignment]
    w.write_run()
    return dest


def add_step(w: RunWriter, step: int) -> None:
    w.write_step(step, step_trajectories(step))
    w.log_metrics(step, {"actor/entropy": 1.5 - 0.2 * step, "actor/kl": 0.01 * step})


def add_step_to(path: Path, step: int) -> None:
    """Write one more step into an existing run directory (as a training run would)."""
    from rolloutlab.io import read_run

    add_step(RunWriter(path, read_run(path)), step)


def make_store(root: Path) -> tuple[Path, Path]:
    """(store, agent run directory): the agent run and a verl run with a hostile name."""
    run_dir = make_agent_run(root / "runs" / RUN)
    store = root / "store"
    rolloutlab.ingest([run_dir], store, labels={"arm": "<script>window.__xss=1</script>"})
    dump = write_verl(root / "verl", {s: [[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1]] for s in (1, 2, 3)})
    rolloutlab.ingest([dump], store, name=VERL_NAME)
    return store, run_dir
