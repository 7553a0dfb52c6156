"""Training with generation on an OpenAI-compatible server (the mock) and weight refresh."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import orjson

from rolloutlab.train import load_config
from rolloutlab.train._loop import Trainer
from rolloutlab.train._remote import RemotePolicy
from tests._mock_openai import MockOpenAI

from ._helpers import TINY


def test_a_run_samples_on_the_server(tmp_path: Path) -> None:
    # the server answers each turn with the digit 3 then <eos> (ids of the tiny tokenizer)
    with MockOpenAI(complete=lambda ids: [7, 1]) as mock:
        cfg = load_config(None, [*TINY, "rollout.tasks_per_step=2", "rollout.n=2", "trainer.total_steps=2",
                                 "trainer.save_every=1", "rollout.backend=openai", f"rollout.base_url={mock.base_url}",
                                 "rollout.max_tokens_per_turn=2", "actor.tis_cap=2.0"])
        t = Trainer(cfg, tmp_path / "r")
        res = t.run()
        assert mock.requests > 0 and all(b["prompt"] and isinstance(b["prompt"][0], int) for b in mock.bodies)
    assert res.last_step == 2
    assert isinstance(t.policy, RemotePolicy) and len(t.policy.synced) == 2
    rows = [orjson.loads(x) for x in (tmp_path / "r" / "rollouts" / "step_000001.jsonl").read_bytes().splitlines()]
    assert {r["turns"][0]["action"] for r in rows} == {"3"}
    m = orjson.loads((tmp_path / "r" / "metrics.jsonl").read_bytes().splitlines()[0])["metrics"]
    assert "rollout/sampler_trainer_kl" in m  # the mock's -0.5 log-probs differ from the trainer's
    assert 0 < m["timing/generation_s"] <= m["timing/rollout_s"]  # the server's busy time is part of the rollout


def test_vllm_lora_reload_is_called_with_the_checkpoint(tmp_path: Path) -> None:
    seen: list[tuple[str, dict]] = []

    class H(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, body))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *a: object) -> None:
            return None

    srv = HTTPServer(("127.0.0.1", 0), H)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        cfg = load_config(None, [*TINY, "rollout.backend=openai", f"rollout.base_url={url}", "rollout.weight_sync=vllm_lora"])
        from rolloutlab.agent._tokenizers import guess_number_tokenizer

        pol = RemotePolicy(cfg, guess_number_tokenizer(), tmp_path)
        ck = tmp_path / "checkpoints" / "step_000003"
        ck.mkdir(parents=True)
        pol.after_save(ck)
        assert seen == [("/v1/load_lora_adapter", {"lora_name": "policy-step_000003", "lora_path": str(ck.resolve())})]
        assert pol.model == "policy-step_000003"
        cfg2 = load_config(None, [*TINY, "rollout.backend=openai", f"rollout.base_url={url}", "rollout.weight_sync=sglang_disk"])
        RemotePolicy(cfg2, guess_number_tokenizer(), tmp_path).after_save(ck)
        assert seen[-1] == ("/update_weights_from_disk", {"model_path": str(ck.resolve())})
    finally:
        srv.shutdown()


def test_episodes_fanned_out_over_ray_equal_the_local_ones(tmp_path: Path) -> None:
    """rollout.executor=ray: the same step's rollouts (ids, rewards, actions, sampled token
    ids) as the local executor, against a server whose answer depends on the prompt."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed (pip install 'rolloutlab[ray]')")
    import ray

    def rows(run: Path) -> list[tuple[object, ...]]:
        out = []
        for line in (run / "rollouts" / "step_000001.jsonl").read_bytes().splitlines():
            r = orjson.loads(line)
            out.append((r["traj_id"], r["group_id"], r["reward"], r["num_turns"],
                        tuple(t["action"] for t in r["turns"])))
        return sorted(out)

    # the guess depends on the prompt (the feedback so far): the digits 0..7 are ids 4..11
    with MockOpenAI(complete=lambda ids: [4 + sum(ids) % 8, 1]) as mock:
        base = [*TINY, "rollout.tasks_per_step=3", "rollout.n=2", "trainer.total_steps=1", "trainer.save_every=0",
                "rollout.backend=openai", f"rollout.base_url={mock.base_url}", "rollout.max_tokens_per_turn=2"]
        local = Trainer(load_config(None, base), tmp_path / "local")
        local.run()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        try:
            fanned = Trainer(load_config(None, [*base, "rollout.executor=ray", "rollout.ray_workers=2"]),
                             tmp_path / "ray")
            fanned.run()
        finally:
            ray.shutdown()
    want, got = rows(tmp_path / "local"), rows(tmp_path / "ray")
    assert len(want) == 6 and got == want
    assert len({w[4] for w in want}) > 1 or len({w[2] for w in want}) > 1  # the episodes differ from each other


def test_ray_executor_needs_a_server() -> None:
    import pytest

    from rolloutlab.train._config import ConfigError

    with pytest.raises(ConfigError, match=r"executor=ray needs rollout\.backend=openai"):
        load_config(None, [*TINY, "rollout.executor=ray"])
