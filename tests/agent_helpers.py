"""A scripted text-only policy engine shared by the frozen-policy tests (``inspo evolve`` and
the GEPA adapter): no model, so they are fast."""

from __future__ import annotations

import random
import re

from inspo.data.sources import load_qa_source
from inspo.engines.base import Generation, render_messages
from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION


class ScriptedPolicy:
    """Text-only engine: searches the question, then answers; right only when the prompt's
    instruction is not the seed (the seed makes it answer "Beijing", as the seed's example says)."""

    keeps_token_ids = False

    def __init__(self):
        self.answers = {q.question: q.answers[0] for split in ("train", "dev", "test")
                        for q in load_qa_source("world", split=split)}
        self.calls = 0

    def prompt_text(self, messages):
        return render_messages(None, messages)

    def encode(self, text):
        return None

    def decode(self, ids):
        raise ValueError("text only")

    def generate(self, inputs, *, max_new_tokens, temperature, top_p, stop):
        self.calls += 1
        out = []
        for x in inputs:
            # a prefill ("<search>") follows the question on its line: it is not part of the question
            question = re.search(r"Question: (.*)", x.text).group(1).split("<search>")[0].strip()
            if "<information>" not in x.text:
                opened = x.text.rstrip().endswith("<search>")  # the prefill opened the tag already
                out.append(Generation([], f"{'' if opened else '<search>'}{question}</search>", "stop"))
                continue
            seed_prompt = x.text.startswith(SEARCH_R1_INSTRUCTION + "\n\nQuestion:")
            answer = "Beijing" if seed_prompt else self.answers[question]
            out.append(Generation([], f"<answer>{answer}</answer>", "stop"))
        return out


class CoinPolicy(ScriptedPolicy):
    """Searches, then answers right or wrong by a coin: the reward is pure sampling noise,
    whatever the instruction. The coin is ``self.rng`` (one stream per engine) unless
    ``row_seeds`` is set: then each row's own ``GenerationInput.seed`` decides its coin."""

    def __init__(self, row_seeds: bool = False):
        super().__init__()
        self.rng = random.Random(0)
        self.row_seeds = row_seeds
        self.batches: list[int] = []

    def generate(self, inputs, **kwargs):
        self.batches.append(len(inputs))
        out = []
        for x in inputs:
            if "<information>" not in x.text:
                out.append(Generation([], "<search>the question</search>", "stop"))
                continue
            question = re.search(r"Question: (.*?)(?:<search>|\n|$)", x.text).group(1).strip()
            coin = random.Random(x.seed).random() if self.row_seeds else self.rng.random()
            answer = self.answers[question] if coin < 0.5 else "no"
            out.append(Generation([], f"<answer>{answer}</answer>", "stop"))
        return out


class TurnScript:
    """Text-only engine that plays ``script(question, turn) -> (text, finish)`` for each row.

    ``turn`` is 0-based and counted per question (so questions must differ within a batch);
    ``finish`` is the engine's ``"stop"``, ``"eos"`` or ``"length"``. ``contexts`` records the
    context text of every row of every ``generate`` call, to check what the policy was shown.
    """

    keeps_token_ids = False

    def __init__(self, script):
        self.script = script
        self.prompts: dict[str, str] = {}  # prompt text -> question
        self.turns: dict[str, int] = {}
        self.contexts: list[list[str]] = []

    def prompt_text(self, messages):
        text = render_messages(None, messages)
        self.prompts[text] = text.rsplit("Question: ", 1)[-1].strip()
        return text

    def encode(self, text):
        return None

    def decode(self, ids):
        raise ValueError("text only")

    def generate(self, inputs, *, max_new_tokens, temperature, top_p, stop):
        self.contexts.append([x.text for x in inputs])
        out = []
        for x in inputs:
            question = next(q for p, q in self.prompts.items() if x.text.startswith(p))
            turn = self.turns.get(question, 0)
            self.turns[question] = turn + 1
            text, finish = self.script(question, turn)
            out.append(Generation([], text, finish))
        return out


def greedy_ids(engine, prompt_ids, tokens):
    """The token ids ``engine`` decodes greedily after ``prompt_ids`` (no stop strings): the
    vLLM sync tests compare vLLM's with transformers' on the same weights."""
    from inspo.engines.base import GenerationInput

    out = engine.generate([GenerationInput(prompt_ids, [], "")], max_new_tokens=tokens, temperature=0.0, top_p=1.0,
                          stop=[])
    return out[0].token_ids


def hf_greedy_ids(model, tokenizer, prompt_ids, tokens):
    """:func:`greedy_ids` of a transformers model through inspo's HF engine."""
    from inspo.engines.hf import HFEngine

    return greedy_ids(HFEngine(model, tokenizer), prompt_ids, tokens)


class Scripted:
    """Wraps ``model.generate``: forces scripted text per row and records inputs and outputs.

    ``script(qid, turn)`` returns the text row ``qid`` must write on ``turn`` (0-based), or None
    to let the model sample freely. ``eos=True`` appends the EOS token after the text.
    ``keep_stop_strings=False`` drops the engine's stopping criteria, so the model runs on past
    a tag and the engine's trimming must cut it.
    """

    def __init__(self, loaded, script, *, eos=False, keep_stop_strings=True):
        self.model = loaded.model
        self.tok = loaded.tokenizer
        self.script = script
        self.eos = eos
        self.keep_stop_strings = keep_stop_strings
        self.calls: list[dict] = []  # {"inputs": [ids...], "raw": [ids...]} per generate call
        self.original = self.model.generate

    def _row_context(self, ids, mask) -> tuple[str, int]:
        text = self.tok.decode([t for t, m in zip(ids, mask, strict=True) if m])
        qid = re.search(r"Question: (q\d+)", text).group(1)
        after = text.split("Question:", 1)[1]
        turn = len(re.findall(r"</(?:information|result|tool_response)>", after)) + after.count("Let me try again.")
        return qid, turn

    def __call__(self, input_ids, attention_mask, generation_config, **kwargs):
        import torch
        from transformers import LogitsProcessor, LogitsProcessorList

        start = input_ids.shape[1]
        forced = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist(), strict=True):
            text = self.script(*self._row_context(ids, mask))
            row = None if text is None else self.tok(text, add_special_tokens=False)["input_ids"]
            if row is not None and self.eos:
                row = row + [self.tok.eos_token_id]
            forced.append(row)

        class Force(LogitsProcessor):
            def __call__(self, seq, scores):
                step = seq.shape[1] - start
                for r, row in enumerate(forced):
                    if row is not None and step < len(row):
                        scores[r] = -torch.inf
                        scores[r, row[step]] = 0.0
                return scores

        if not self.keep_stop_strings:
            kwargs.pop("stopping_criteria")
        # the engine's own processors (its sampler) run after the forcing, as transformers' warpers
        # and multinomial ran after it under do_sample: a forced row draws its forced token
        processors = LogitsProcessorList([Force(), *kwargs.pop("logits_processor", [])])
        out = self.original(
            input_ids=input_ids,
            attention_mask=attention_mask,
            generation_config=generation_config,
            logits_processor=processors,
            **kwargs,
        )
        self.calls.append(
            {
                "inputs": [
                    [t for t, m in zip(ids, mask, strict=True) if m]
                    for ids, mask in zip(input_ids.tolist(), attention_mask.tolist(), strict=True)
                ],
                # HFEngine asks for a dict inside episode_cache() (it keeps the cache): the ids either way
                "raw": [row[start:] for row in getattr(out, "sequences", out).tolist()],
            }
        )
        return out
