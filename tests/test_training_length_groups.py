"""Micro-batches of similar lengths (``rl.group_by_length``, :mod:`inspo.training.length_groups`):
the reordering against a naive reference, every value of a row moved together, rows never crossing
an optimizer update, and one seeded GRPO step whose update is the same grouped or not."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")  # the buffer is cut again as TRL cut it (trl.trainer.utils.split_tensor_dict)

from inspo.training.length_groups import length_order, prompt_order, regroup_by_length, row_ends  # noqa: E402


def _buffer(lengths: list[int], rows: int, prompt: int = 3) -> list[dict]:
    """TRL's buffer for one generation: micro-batches of ``rows`` rows, completion ``lengths``
    right-padded to the longest, with a row-indexed tensor, a list and a 0-d value beside them."""
    width = max(lengths)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    batch = {
        "prompt_ids": torch.arange(len(lengths))[:, None].repeat(1, prompt),
        "prompt_mask": torch.ones(len(lengths), prompt, dtype=torch.long),
        "completion_ids": torch.arange(len(lengths))[:, None] * 100 + torch.arange(width),
        "completion_mask": mask,
        "advantages": torch.arange(len(lengths), dtype=torch.float32) / 10,
        "question_id": [f"q{i}" for i in range(len(lengths))],
        "num_items_in_batch": torch.tensor(float(sum(lengths))),
        "old_per_token_logps": None,
    }
    return [{k: (v[s : s + rows] if isinstance(v, list) or (torch.is_tensor(v) and v.ndim) else v)
             for k, v in batch.items()} for s in range(0, len(lengths), rows)]


def _naive_order(ends: list[int], window: int) -> list[int]:
    out = []
    for start in range(0, len(ends), window):
        idx = list(range(start, min(start + window, len(ends))))
        # insertion sort: stable by construction
        for i in range(1, len(idx)):
            j = i
            while j > 0 and ends[idx[j - 1]] > ends[idx[j]]:
                idx[j - 1], idx[j] = idx[j], idx[j - 1]
                j -= 1
        out.extend(idx)
    return out


def test_length_order_matches_a_naive_windowed_stable_sort():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 40)
        ends = [rng.randint(1, 6) for _ in range(n)]
        window = rng.randint(1, n)
        assert length_order(ends, window) == _naive_order(ends, window)


def test_row_ends_are_prompt_width_plus_last_attended_completion_token():
    (mb,) = _buffer([2, 5, 1], rows=3)
    mb["completion_mask"][0] = torch.tensor([1, 0, 1, 0, 0])  # a masked token inside the row
    mb["completion_mask"][2] = 0  # a row attending to no completion token
    assert row_ends(mb) == [3 + 3, 3 + 5, 3]


def test_regrouping_moves_whole_rows_within_each_update():
    lengths = [9, 1, 8, 2, 7, 3, 6, 4, 5, 1, 9, 2]
    buffer = _buffer(lengths, rows=2)
    out = regroup_by_length(buffer, per_update=3)  # 6 micro-batches of 2 rows: 2 updates of 6 rows
    assert [len(mb["prompt_ids"]) for mb in out] == [2] * 6
    ids = [int(r) for mb in out for r in mb["prompt_ids"][:, 0]]
    assert sorted(ids[:6]) == list(range(6)) and sorted(ids[6:]) == list(range(6, 12))  # no row crosses
    assert ids == length_order(lengths, 6)
    for mb in out:  # every value of a row travels with it
        rows = [int(r) for r in mb["prompt_ids"][:, 0]]
        assert mb["question_id"] == [f"q{i}" for i in rows]
        assert torch.equal(mb["advantages"], torch.tensor(rows, dtype=torch.float32) / 10)
        assert torch.equal(mb["completion_ids"][:, 0], torch.tensor(rows) * 100)
        assert [int(m.sum()) for m in mb["completion_mask"]] == [lengths[i] for i in rows]
        assert mb["num_items_in_batch"] is buffer[0]["num_items_in_batch"] and mb["old_per_token_logps"] is None

    def padded(batches):  # what the passes pay: each micro-batch as wide as its longest row
        return sum(len(mb["prompt_ids"]) * max(row_ends(mb)) for mb in batches)

    assert padded(out) < padded(buffer)


def test_prompt_order_keeps_a_prompts_rows_together_in_order_of_first_appearance_within_each_window():
    prompts = [[5, 6], [7], [5, 6], [8, 8], [7], [5, 6], [7], [7], [9]]
    width = 3
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])  # left-padded, as TRL pads
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    order = prompt_order({"prompt_ids": ids, "prompt_mask": mask}, window=6)
    naive = []
    for start in (0, 6):
        rows = list(range(start, min(start + 6, len(prompts))))
        seen = []
        for i in rows:
            if prompts[i] not in seen:
                seen.append(prompts[i])
        naive += [i for p in seen for i in rows if prompts[i] == p]
    assert order == naive == [0, 2, 5, 1, 4, 3, 6, 7, 8]


def test_regrouping_by_prompt_puts_a_questions_rows_in_the_same_micro_batches():
    buffer = _buffer([3, 1, 2, 4, 1, 2, 3, 4], rows=2)
    for i, mb in enumerate(buffer):  # rows 0..7 continue prompts a b a b c d c d: two per update
        mb["prompt_ids"] = torch.tensor([[[0, 1, 0, 1, 2, 3, 2, 3][2 * i + j]] * 3 for j in range(2)])
    out = regroup_by_length(buffer, per_update=2, by_prompt=True)
    assert [mb["question_id"] for mb in out] == [["q0", "q2"], ["q1", "q3"], ["q4", "q6"], ["q5", "q7"]]


@pytest.mark.parametrize("case", ["one micro-batch an update", "a value without rows", "missing key"])
def test_buffers_that_cannot_be_regrouped_come_back_unchanged(case):
    buffer = _buffer([5, 1, 4, 2], rows=2)
    per_update = 2
    if case == "one micro-batch an update":
        per_update = 1
    elif case == "a value without rows":
        for mb in buffer:
            mb["pixel_values"] = torch.zeros(7, 3)  # not one row per trajectory
    else:
        del buffer[1]["question_id"]
    assert regroup_by_length(buffer, per_update) is buffer


_REAL: dict = {}  # the functions _one_step wraps, as the module has them before any run patches them


def _one_step(tmp, grouped: bool, monkeypatch, packed: bool = False) -> tuple[dict, list[int]]:
    """One static GRPO step of the tiny calculator run (LoRA without dropout, so the update is a
    function of the rollouts alone), 8 trajectories in micro-batches of 2 (4 accumulated), the CPU
    pass packed or not (``rl.pack_prompts``); its TRL loss and gradient norm, and for each
    regrouping its per_update, whether rows moved and whether by prompt."""
    from inspo import artifacts
    from inspo.config.train import resolve
    from inspo.training import grpo_trainer
    from inspo.training.run import run_training
    from train_run_script import scripted_reward

    calls: list[tuple[int, bool]] = []
    real, batch_of = _REAL.setdefault("fns", (grpo_trainer.regroup_by_length, grpo_trainer.rollout_batch))

    def spy(buffer, per_update, by_prompt=False):
        out = real(buffer, per_update, by_prompt=by_prompt)
        moved = [mb["completion_ids"].tolist() for mb in out] != [mb["completion_ids"].tolist() for mb in buffer]
        calls.append((per_update, moved, by_prompt))
        if by_prompt:  # each micro-batch holds one question's rows (groups of 4 in micro-batches of 2)
            assert all(len({tuple(r.tolist()) for r in mb["prompt_ids"]}) == 1 for mb in out)
        return out

    monkeypatch.setattr(grpo_trainer, "regroup_by_length", spy)

    def uneven(rollouts, fallback_token):
        """The tiny model plays every episode to the same length: cut row i's completion by
        (i * 5) % 17 tokens, so the step's rows differ in length (the same in both runs)."""
        batch = batch_of(rollouts, fallback_token)
        for i, ids in enumerate(batch["completion_ids"]):
            keep = max(1, len(ids) - (i * 5) % 17)
            batch["completion_ids"][i], batch["env_mask"][i] = ids[:keep], batch["env_mask"][i][:keep]
            if batch["logprobs"] is not None:
                batch["logprobs"][i] = batch["logprobs"][i][:keep]
        return batch

    monkeypatch.setattr(grpo_trainer, "rollout_batch", uneven)
    torch.set_num_threads(1)
    out = tmp / (("grouped" if grouped else "mixed") + ("-packed" if packed else ""))
    config = resolve("calculator", overrides=[
        "model.name_or_path=tiny-qwen2", "model.dtype=float32", "rl.bf16=false", "mode=static",
        "model.lora_dropout=0.0", "rl.questions_per_step=2", "rl.group_size=4", "rl.micro_batch_size=2",
        "rl.max_turns=2", "rl.max_response_tokens=8", "rl.max_obs_tokens=16", "rl.learning_rate=0.01",
        "rl.save_steps=0", "rl.steps=1", "data.warmup_questions=2", "data.max_eval_questions=2",
        "data.max_test_questions=0", "final_choice=weight", f"rl.group_by_length={str(grouped).lower()}",
        f"rl.pack_prompts={str(packed).lower()}", f"output_dir={out}",
    ])
    run_training(config, progress=False, reward_fn=scripted_reward)
    (line,) = [m for m in artifacts.read_jsonl(out / "metrics.jsonl") if "grad_norm" in m]
    return line, calls


@pytest.mark.slow
def test_a_grouped_step_makes_the_same_update(tmp_path, monkeypatch):
    grouped, calls = _one_step(tmp_path, True, monkeypatch)
    mixed, no_calls = _one_step(tmp_path, False, monkeypatch)
    assert calls == [(4, True, False)] and no_calls == []  # 4 micro-batches regrouped as one update
    assert grouped["reward/mean"] == mixed["reward/mean"]  # the same rollouts
    assert grouped["grad_norm"] > 0
    assert grouped["grad_norm"] == pytest.approx(mixed["grad_norm"], rel=1e-5)
    assert grouped["loss"] == pytest.approx(mixed["loss"], rel=1e-5, abs=1e-7)


@pytest.mark.slow
def test_a_packed_step_makes_the_same_update(tmp_path, monkeypatch):
    """rl.pack_prompts: rows ordered by prompt, each micro-batch one packed row (a question's
    prompt once): the padded, unordered step's update to float32 rounding."""
    packed, calls = _one_step(tmp_path, False, monkeypatch, packed=True)
    padded, no_calls = _one_step(tmp_path, False, monkeypatch, packed=False)
    assert calls == [(4, True, True)] and no_calls == []
    assert packed["reward/mean"] == padded["reward/mean"]  # the same rollouts
    assert packed["grad_norm"] > 0
    assert packed["grad_norm"] == pytest.approx(padded["grad_norm"], rel=1e-5)
    assert packed["loss"] == pytest.approx(padded["loss"], rel=1e-5, abs=1e-7)
