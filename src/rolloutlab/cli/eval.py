"""``rolloutlab eval``: trainer-free evaluation of a policy or of every checkpoint of a run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rolloutlab.cli._app import JsonOpt, app, err_console


@app.command("eval")
def eval_(
    env: Annotated[str, typer.Option("--env", help="Environment: a registered id (see `rolloutlab env list`) or agentgym:NAME@URL, openenv@URL, rolloutlab@URL.")],
    out: Annotated[Path, typer.Option("--out", help="Run directory to write; re-running into it resumes.")],
    policy: Annotated[str | None, typer.Option("--policy", help="random | scripted:NAME | openai:BASE_URL:MODEL | hf:PATH.")] = None,
    checkpoints: Annotated[Path | None, typer.Option("--checkpoints", help="Folder of checkpoint-N / global_step_N / step_N folders; each is evaluated as hf:<folder>.")] = None,
    parser: Annotated[str | None, typer.Option("--parser", help="Action parser: text, xml, react, search_r1, tool_call, hermes (default: the environment's).")] = None,
    episodes: Annotated[int, typer.Option("--episodes", help="N: tasks from the split.")] = 100,
    samples: Annotated[int, typer.Option("--samples", help="K: episodes per task (pass@k up to K).")] = 1,
    split: Annotated[str, typer.Option("--split", help="Task split.")] = "test",
    seed: Annotated[int, typer.Option("--seed", help="Task order and episode seeds.")] = 0,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Episodes at once.")] = 16,
    executor: Annotated[str, typer.Option("--executor", help="asyncio (this process) or ray (Ray workers).")] = "asyncio",
    max_turns: Annotated[int | None, typer.Option("--max-turns", help="Horizon (default: the environment's).")] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Per-turn token cap.")] = 512,
    temperature: Annotated[float, typer.Option("--temperature", help="Sampling temperature.")] = 1.0,
    top_p: Annotated[float, typer.Option("--top-p", help="Nucleus sampling threshold.")] = 1.0,
    invalid_penalty: Annotated[float | None, typer.Option("--invalid-penalty", help="Reward of an unparseable reply (default: none).")] = None,
    env_timeout: Annotated[float, typer.Option("--env-timeout", help="Seconds one environment call may take.")] = 60.0,
    env_retries: Annotated[int, typer.Option("--env-retries", help="Fresh-environment restarts of a failed episode.")] = 2,
    policy_retries: Annotated[int, typer.Option("--policy-retries", help="Retries of a failed policy call (with backoff).")] = 3,
    json_: JsonOpt = False,
) -> None:
    """Evaluate N tasks x K samples; writes eval/<checkpoint>/episodes.jsonl and summary.json."""
    import orjson
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from rolloutlab.evaluate import EvalConfig, run_eval
    from rolloutlab.evaluate import Progress as EvalProgress

    config = EvalConfig(
        env=env, out=out, policy=policy, checkpoints=checkpoints, parser=parser, episodes=episodes,
        samples=samples, split=split, seed=seed, concurrency=concurrency, executor=executor,  # type: ignore[arg-type]
        max_turns=max_turns, max_tokens_per_turn=max_tokens, temperature=temperature, top_p=top_p,
        invalid_action_penalty=invalid_penalty, env_timeout_s=env_timeout, env_retries=env_retries,
        policy_retries=policy_retries,
    )
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=err_console, transient=False, disable=json_) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(p: EvalProgress) -> None:
            if p.checkpoint not in tasks:
                tasks[p.checkpoint] = bar.add_task(p.checkpoint, total=p.total)
            bar.update(tasks[p.checkpoint], completed=p.done, description=p.line()[:48])

        summaries = run_eval(config, on_progress=progress)
    if json_:
        typer.echo(orjson.dumps([s.model_dump(mode="json") for s in summaries], option=orjson.OPT_INDENT_2).decode())
        return
    from rich.console import Console
    from rich.table import Table

    ks = [str(k) for k in config.ks][-2:]
    table = Table(title=f"{env} ({split}, {episodes} tasks x {samples})", title_justify="left")
    for col in ["checkpoint", "success", "reward", *[f"pass@{k}" for k in ks], "turns", "ungraded"]:
        table.add_column(col, justify="left" if col == "checkpoint" else "right", overflow="fold")

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    for s in summaries:
        table.add_row(s.checkpoint[:24], f(s.success_rate), f(s.mean_reward), *[f(s.pass_at_k.get(k)) for k in ks],
                      f(s.mean_turns), f(s.ungraded_rate))
    Console(width=80, highlight=False).print(table)
    err_console.print(f"wrote {out}/eval/ — read it with `rolloutlab ingest {out}` then `rolloutlab analyze`", highlight=False)
