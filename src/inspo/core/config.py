"""The INSPO core's configuration. Defaults are the paper's (App. B)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from typing import Any

from inspo.core.leak_scope import LEAK_SCOPES
from inspo.core.templates import TEMPLATES

ADMISSIONS = ("top-n", "beat-parent", "paired")
VALIDATION_SOURCES = ("buffer", "train")
#: The most candidates one optimizer call may be asked for (App. E's prompts ask the paper's 6).
MAX_CANDIDATES_PER_CALL = 6

#: Settings a resumed run cannot change: the saved state holds a copy of them (the population's
#: size, weight window, sampling temperature and evidence rules; the replay buffer's capacity) or
#: was drawn from them (``seed``: the random streams). Every other setting is read when it is
#: used, so a resumed run applies a new value from its next step on.
FIXED_ON_RESUME: tuple[str, ...] = (
    "population_size",
    "weight_window",
    "tau_s",
    "min_evidence",
    "prior_rollouts",
    "fair_share",
    "replay_capacity",
    "seed",
)


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the field and what is allowed."""


@dataclass(frozen=True)
class SettingChange:
    """One co-evolution setting whose value differs between a saved state and the config that
    resumes it."""

    key: str
    old: Any
    new: Any

    def __str__(self) -> str:
        return f"{self.key}: {self.old!r} -> {self.new!r}"


class ResumeConfigError(ConfigError):
    """A resume changes settings in :data:`FIXED_ON_RESUME`; ``changes`` lists them."""

    def __init__(self, changes: list[SettingChange]):
        self.changes = list(changes)
        listed = ", ".join(str(c) for c in self.changes)
        super().__init__(
            f"cannot resume with changed co-evolution setting(s) {listed}: the saved state was "
            f"built with the old values ({', '.join(FIXED_ON_RESUME)} cannot change mid-run). "
            "Resume with the old values, or start a new run in another output directory"
        )


@dataclass
class CoEvolutionConfig:
    """Population, schedule and optimizer settings of INSPO (paper App. B defaults)."""

    population_size: int = 7
    """N_P: the most instructions alive at once (the population is refilled to this size)."""
    n_parent: int = 1
    """N_parent: instructions kept as parents at each evolution; pruning never goes below it."""
    tau_s: float = 0.2
    """Softmax temperature of instruction sampling, p(I_j) = softmax(w / tau_s) (Eq. 4)."""
    weight_window: int = 5
    """n: an instruction's weight is the mean of its last n per-step mean rewards (Eq. 6)."""
    prune_every: int = 5
    """K_p: prune the bottom half every K_p steps while |P| > N_parent."""
    prune: bool = True
    """False gives the paper's no-prune ablation (constant population, no halving)."""
    evolve_every: int = 15
    """K_e: evolve new instructions every K_e steps ..."""
    evolve_until: int = 150
    """T_e: ... while t < T_e."""
    evolve: bool = True
    """False keeps the initial population for the whole run (static baseline when N_P is 1)."""
    init_population: bool = True
    """Fill the initial population from the seed with the optimizer before step 1."""
    n_failures: int = 4
    """Failure trajectories sampled from the replay buffer per optimizer call."""
    failure_threshold: float = 1.0
    """A trajectory whose reward is below this counts as a failure."""
    validation_size: int = 200
    """|D_B|: questions drawn from the replay buffer to verify each candidate."""
    candidates_per_call: int = 6
    """N: candidates asked of the optimizer per call (<ins_1> … <ins_N>), 1 to 6 (the paper's 6;
    fewer suits a small optimizer LLM, whose answer must fit optimizer_max_tokens)."""
    answers_per_call: int = 1
    """Answers sampled from one optimizer call (its ``n``): each is read for its N candidates, and
    all of them are verified together. 1: the paper's one answer a call. More samples the same
    prompt several times in one batch (the local client and OpenAI-compatible servers batch ``n``):
    more tries for a small optimizer that is right rarely (what a batch costs:
    benchmarks/speed/optimizer_answers.py)."""
    admit_per_round: int = 0
    """n of Algorithm 1 line 21: the top-n candidates admitted per generate-and-verify round (never
    more than the free slots). 0: half the call's candidates, rounded up, so verification always
    turns some away (the paper's "only the top-n"; see docs/paper.md)."""
    verify: bool = True
    """False is the paper's no-verify ablation (Fig. 3): candidates join unverified, in proposal
    order."""
    admission: str = "top-n"
    """top-n (Algorithm 1); beat-parent: the parent is verified on the same D_B questions with
    the same sampling seeds, and only candidates scoring at least the parent's score are admitted;
    paired: the parent is played once an evolution on D_B, each candidate races it question by
    question (``race_futility``, ``race_chunk``) and is admitted only with more wins than losses
    on the questions it played, best paired difference first (docs/choosing-on-evidence.md)."""
    verify_greedy: bool = False
    """Verification decodes greedily (temperature 0): one deterministic rollout per D_B question, so
    a candidate and its parent differ on a question only because their instructions do. False: the
    run's sampling temperature with paired sampling seeds (App. B)."""
    validation_from: str = "buffer"
    """Where D_B is drawn from: buffer (App. B: questions already played, which at step 0 is the
    warm-up set alone) or train (the training questions, so a D_B of 64 exists from step 0)."""
    validation_unseen: bool = False
    """D_B leaves out the questions whose failures the round's optimizer call was shown (a candidate
    written from a problem is never verified on it). False: D_B is drawn from the whole buffer."""
    gate: bool = False
    """Before D_B, a candidate and its parent (once per round) play the failure problems the
    optimizer call was shown; only a candidate that wins more of them than it loses goes on (GEPA's
    minibatch check: a bad candidate costs a few rollouts). False: every candidate plays D_B."""
    evolve_rollouts: int = 0
    """The most verification rollouts (gate, parent and D_B) one evolution may spend: no further
    optimizer call is made once they are spent, or once what is left cannot pay for judging one
    more candidate (under ``admission: paired`` the parent's D_B questions not yet played and one
    race chunk; otherwise all of D_B), so a round of refused candidates cannot run on, and a round
    stops verifying where they run out (a candidate it cannot pay to play on is refused, stage
    ``budget``, the last proposed first). 0: no budget (``max_rounds`` alone bounds an evolution,
    as App. B)."""
    max_optimizer_tokens: int = 0
    """The most optimizer tokens (prompt + completion) a run may use: no optimizer call is made
    once they are spent (the population then stays as it is). 0: no cap."""
    race_futility: int = 4
    """Under ``admission: paired``: a candidate's verification stops early once its losses to the
    parent exceed its wins by this many (questions where exactly one of the two scores higher;
    docs/choosing-on-evidence.md gives the rule's error rates). 0: every candidate plays the whole
    D_B."""
    race_chunk: int = 8
    """Under ``admission: paired``: D_B questions played per race round (the futility check runs
    after each chunk; a larger chunk batches better and stops later)."""
    split_groups: bool = False
    """Paired credit: with two or more members, each question group is split in half between the
    champion (the current best) and a challenger drawn by softmax from the others, so both are
    credited on the same questions (GRPO's advantage is computed across both halves), and a member
    admitted by the paired race is not pruned without split-group evidence that it is worse.
    False: one instruction per group (Algorithm 1)."""
    protocol_block: bool = False
    """An evolved instruction is the optimizer's strategy text followed by the environment's
    protocol block (its tags and how to use them), so no candidate can drop a tag; the optimizer is
    asked for the strategy only. False: the optimizer rewrites the whole instruction (the paper)."""
    min_evidence: int = 0
    """Evidence rule: a member observed on fewer rollouts in its weight window is never pruned and
    ranks (parents, I*) after every member with enough. 0: Algorithm 1 (weights decide alone)."""
    prior_rollouts: float = 0.0
    """Evidence rule: rank and sample by the posterior mean of the window's rewards with a prior
    (the member's verification score) worth this many rollouts. 0: Algorithm 1's weights."""
    fair_share: bool = False
    """Evidence rule (needs min_evidence > 0): a member below the evidence floor is sampled with
    probability 1/N (its uniform share) until it has min_evidence rollouts in its window; the
    others split the rest by softmax. False: Algorithm 1's softmax over every member."""
    max_rounds: int = 5
    """Most generate-and-verify rounds per evolution before the population stays short."""
    template: str = "reflection"
    """Optimizer prompt: reflection (INSPO), paraphrase or history (App. E)."""
    max_instruction_chars: int = 6000
    """The guard rejects longer candidates."""
    leak_guard: bool = True
    """Refuse (stage ``leak``) a candidate that contains a gold answer of the failures its optimizer
    call was shown or of the D_B questions it would be verified on
    (inspo.core.proposer.leaked_answer)."""
    leak_scope: str = "shown"
    """What the leak check refuses (under ``leak_guard``). shown: a gold answer of the failures the
    optimizer call was shown or of D_B (a worked example built on a shown problem is refused).
    held-out: a candidate that names a dev or test problem (the environment's ``names_problem``:
    its text or operands with its answer); training problems it names, shown or in D_B, are left out
    of the comparisons that judge it instead (needs admission paired;
    docs/choosing-on-evidence.md)."""
    guard_tags: list[str] | None = None
    """Tags a candidate must keep (open and close) when its parent has them. None: the
    environment's required tags (those the policy must write: Search-R1's search and answer);
    a list names them (add information/think to keep those too); [] turns the check off (the paper
    has none; a weak optimizer LLM often drops tags)."""
    feedback: bool = False
    """Show each failure's feedback line (the environment's one-line account of the episode, GEPA's
    Feedback) in the reflection prompt, under its correct answer. False: App. E's examples as they
    are (question, response, correct answer)."""
    replay_capacity: int = 20000
    """The replay buffer keeps at most this many trajectories (oldest dropped first)."""
    optimizer_temperature: float = 1.0
    """Sampling temperature for the optimizer LLM."""
    optimizer_max_tokens: int = 4096
    """Completion budget of one optimizer call."""
    seed: int | None = None
    """Seeds every decision of the core (sampling, parents, failures, D_B). None: 0 when the core
    is used alone; ``inspo train`` fills it from ``rl.seed`` (the run's one seed)."""

    def __post_init__(self) -> None:
        self._check_counts()
        self._check_parents_and_guard()
        self._check_switches_race_and_seed()
        self._check_validation_and_admission()
        self._check_evidence_and_optimizer()

    def _check_counts(self) -> None:
        """The sizes, periods and budgets are integers (positive, or >= 0 where 0 means off or
        all), and ``candidates_per_call`` is between 1 and :data:`MAX_CANDIDATES_PER_CALL`."""
        positive = (
            "population_size",
            "n_parent",
            "weight_window",
            "prune_every",
            "evolve_every",
            "max_rounds",
            "max_instruction_chars",
            "replay_capacity",
            "optimizer_max_tokens",
            "answers_per_call",
        )
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name in (
            "n_failures",
            "validation_size",
            "admit_per_round",
            "evolve_until",
            "race_futility",
            "evolve_rollouts",
            "max_optimizer_tokens",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{name} must be an integer >= 0, got {value!r}")
        n = self.candidates_per_call
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_CANDIDATES_PER_CALL:
            raise ConfigError(
                f"candidates_per_call must be an integer from 1 to {MAX_CANDIDATES_PER_CALL} (the "
                f"<ins_i> blocks asked of one optimizer call; the paper asks 6), got {n!r}"
            )

    def _check_parents_and_guard(self) -> None:
        """``leak_guard`` is a bool, the parents fit in the population, the softmax temperature
        is positive, the template is known and ``guard_tags`` are tag names (kept as a list)."""
        if not isinstance(self.leak_guard, bool):
            raise ConfigError(f"leak_guard must be true or false, got {self.leak_guard!r}")
        if self.n_parent > self.population_size:
            raise ConfigError(
                f"n_parent ({self.n_parent}) cannot exceed population_size ({self.population_size})"
            )
        if not self.tau_s > 0:
            raise ConfigError(f"tau_s must be > 0 (softmax temperature), got {self.tau_s!r}")
        if self.template not in TEMPLATES:
            raise ConfigError(
                f"template must be one of {', '.join(TEMPLATES)}; got {self.template!r}"
            )
        if self.guard_tags is not None:
            if not isinstance(self.guard_tags, (list, tuple)) or not all(
                isinstance(t, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", t)
                for t in self.guard_tags
            ):
                raise ConfigError(
                    "guard_tags must be a list of tag names such as [search, answer] (null: the "
                    f"environment's required tags; [] for no tag check); got {self.guard_tags!r}"
                )
            self.guard_tags = list(self.guard_tags)

    def _check_switches_race_and_seed(self) -> None:
        """The on/off settings are bools, a race round plays a positive number of questions, and
        the seed is an integer or None."""
        for name in (
            "feedback",
            "verify_greedy",
            "validation_unseen",
            "protocol_block",
            "gate",
            "split_groups",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if (
            not isinstance(self.race_chunk, int)
            or isinstance(self.race_chunk, bool)
            or self.race_chunk < 1
        ):
            raise ConfigError(
                f"race_chunk must be a positive integer (D_B questions a race round), "
                f"got {self.race_chunk!r}"
            )
        if self.seed is not None and (
            not isinstance(self.seed, int) or isinstance(self.seed, bool)
        ):
            raise ConfigError(
                f"seed must be an integer (or null to follow rl.seed), got {self.seed!r}"
            )

    def _check_validation_and_admission(self) -> None:
        """D_B's source, the leak scope and the admission rule are known, and a held-out leak
        scope comes with paired admission."""
        if self.validation_from not in VALIDATION_SOURCES:
            raise ConfigError(
                f"validation_from must be one of {', '.join(VALIDATION_SOURCES)}; "
                f"got {self.validation_from!r}"
            )
        if self.leak_scope not in LEAK_SCOPES:
            raise ConfigError(
                f"leak_scope must be one of {', '.join(LEAK_SCOPES)}; got {self.leak_scope!r}"
            )
        if self.leak_scope == "held-out" and self.admission != "paired":
            raise ConfigError(
                "leak_scope held-out lets worked examples of training problems through and leaves "
                "the problems they name out of the paired comparisons that judge them, which only "
                f"admission paired makes (admission is {self.admission!r}): set admission: paired, "
                "or leak_scope: shown"
            )
        if self.admission not in ADMISSIONS:
            raise ConfigError(
                f"admission must be one of {', '.join(ADMISSIONS)}; got {self.admission!r}"
            )

    def _check_evidence_and_optimizer(self) -> None:
        """The evidence floor and prior are non-negative, ``fair_share`` is a bool that needs a
        floor, and the optimizer's temperature is >= 0."""
        if (
            not isinstance(self.min_evidence, int)
            or isinstance(self.min_evidence, bool)
            or self.min_evidence < 0
        ):
            raise ConfigError(
                f"min_evidence must be an integer >= 0 (rollouts), got {self.min_evidence!r}"
            )
        if (
            isinstance(self.prior_rollouts, bool)
            or not isinstance(self.prior_rollouts, (int, float))
            or self.prior_rollouts < 0
        ):
            raise ConfigError(
                "prior_rollouts must be a number >= 0 (pseudo-rollouts), got "
                f"{self.prior_rollouts!r}"
            )
        if not isinstance(self.fair_share, bool):
            raise ConfigError(f"fair_share must be true or false, got {self.fair_share!r}")
        if self.fair_share and self.min_evidence == 0:
            raise ConfigError(
                "fair_share gives members below the evidence floor their uniform share, and "
                "min_evidence is 0 (no floor): set coevolution.min_evidence > 0 or fair_share false"
            )
        if self.optimizer_temperature < 0:
            raise ConfigError(
                f"optimizer_temperature must be >= 0, got {self.optimizer_temperature!r}"
            )

    @property
    def rng_seed(self) -> int:
        """The seed in use: ``seed``, or 0 when it is None."""
        return 0 if self.seed is None else self.seed

    def admit_n(self, free: int) -> int:
        """How many candidates one round may admit when ``free`` slots are open."""
        n = self.admit_per_round or -(-self.candidates_per_call // 2)
        return max(0, min(free, n))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CoEvolutionConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(
                f"unknown co-evolution setting(s): {', '.join(unknown)}; "
                f"known settings are: {', '.join(sorted(known))}"
            )
        return cls(**data)


def config_changes(saved: CoEvolutionConfig, current: CoEvolutionConfig) -> list[SettingChange]:
    """Every setting whose value differs from ``saved`` to ``current``, in field order."""
    return [
        SettingChange(f.name, getattr(saved, f.name), getattr(current, f.name))
        for f in fields(CoEvolutionConfig)
        if getattr(saved, f.name) != getattr(current, f.name)
    ]


def resume_changes(saved: CoEvolutionConfig, current: CoEvolutionConfig) -> list[SettingChange]:
    """The changes a run resumed under ``current`` makes to a state saved under ``saved``.

    Raises :class:`ResumeConfigError`, naming each one with its old and new value, when any of
    them is in :data:`FIXED_ON_RESUME`; otherwise returns them all (empty: nothing changed).
    """
    changes = config_changes(saved, current)
    fixed = [c for c in changes if c.key in FIXED_ON_RESUME]
    if fixed:
        raise ResumeConfigError(fixed)
    return changes
