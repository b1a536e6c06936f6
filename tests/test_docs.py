"""The docs match the code: every CLI flag and config key has an entry in docs/reference.md, no
entry names one that does not exist, and every Python block in README.md and docs/*.md runs.

Conventions (docs/development.md, "The docs are tested"):

- docs/reference.md has a section ``## `inspo CMD``` per subcommand (``## `inspo``` for the
  top-level flags) and a section ``## Config keys``; an entry is a line starting ``- `` whose
  leading backticked names (``- `-v`, `--verbose`: ...``) are the flags (positionals by their
  dest) or the dotted ``--set`` keys it documents;
- a ```` ```python ```` block runs in a fresh interpreter whose working directory is an empty
  temporary folder, with this checkout's ``src`` first on the path; a block that must not run (a
  GPU, a network endpoint, placeholder names, minutes of work) has ``<!-- no-run: why -->`` on the
  line right before its fence;
- a Python block with ``<!-- file: NAME -->`` on the line right before its fence is also a file:
  it runs like any block, and is written as ``NAME`` into the folder of every later block of the
  same page (docs/your-own-agent.md writes ``my_env.py`` once, then imports it);
- the config keys are ``TrainConfig``'s fields; its ``env`` section is ``env.name``, ``env.python``
  and the settings of every built-in environment (``env.corpus`` for search-r1, ``env.steps`` for
  the calculator ...).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "docs" / "reference.md"
CONFIG_SECTION = "Config keys"
#: Reference sections that describe rather than list flags or keys (not checked against the code).
FREE_SECTIONS = ("Environment variables",)
PYTHON_FENCES = ("python", "py", "python3")
NO_RUN = re.compile(r"^<!--\s*no-run:(?P<why>.*?)-->\s*$")
FILE = re.compile(r"^<!--\s*file:\s*(?P<name>\S*?)\s*-->\s*$")
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
_ENTRY = re.compile(r"^- ((?:`[^`]+`(?:,\s*)?)+)")


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


# ------------------------------------------------------------------------------ the reference
def cli_flags() -> dict[str, set[str]]:
    """Every flag of ``inspo`` and its subcommands, by section name (``inspo``, ``inspo train`` ...);
    positionals by their dest."""
    from inspo.cli import build_parser

    def names(parser: argparse.ArgumentParser) -> set[str]:
        out: set[str] = set()
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            out.update(action.option_strings or [action.dest])
        return out

    parser = build_parser()
    sections = {"inspo": names(parser)}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                sections[f"inspo {command}"] = names(sub)
    return sections


def env_keys() -> set[str]:
    """The ``env:`` section's keys: ``env.name``, ``env.python`` and every setting of every built-in
    environment (the fields of its options dataclass, made by its ``options_from({})``)."""
    import importlib

    from inspo.envs.registry import BUILTINS

    keys = {"env.name", "env.python"}
    for builtin in BUILTINS.values():
        module, _, attr = builtin.options.partition(":")
        options = getattr(importlib.import_module(module), attr)({})
        keys |= {f"env.{f.name}" for f in dataclasses.fields(options)}
    return keys


def config_keys() -> set[str]:
    """Every setting of ``TrainConfig`` under its dotted ``--set`` name, nested dataclasses walked;
    the ``env`` section as :func:`env_keys` (not its ``options`` dict)."""
    from inspo.config.train import EnvConfig, TrainConfig

    def walk(obj, prefix: str) -> set[str]:
        keys: set[str] = set()
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if isinstance(value, EnvConfig):
                keys |= env_keys()
            elif dataclasses.is_dataclass(value):
                keys |= walk(value, f"{prefix}{f.name}.")
            else:
                keys.add(prefix + f.name)
        return keys

    return walk(TrainConfig(), "")


def reference_entries(text: str) -> dict[str, set[str]]:
    """The names each ``## `` section of the reference documents (``### `` sub-headings belong to
    the section above them)."""
    sections: dict[str, set[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:].strip().strip("`")
            sections.setdefault(current, set())
        elif current is not None and (m := _ENTRY.match(line)):
            sections[current].update(re.findall(r"`([^`]+)`", m.group(1)))
    return sections


def test_reference_entries_are_read_as_documented():
    text = ("## `inspo`\n\n- `-v`, `--verbose`: debug, unlike `--not-an-entry`\n"
            "## `inspo train`\n- `--dry-run`: see `--resume`\n  - `--nested` is not an entry\n"
            "## Config keys\n- `mode` (default `inspo`): ...\n### `rl`\n- `rl.steps` (default `300`): ...\n")
    assert reference_entries(text) == {
        "inspo": {"-v", "--verbose"}, "inspo train": {"--dry-run"}, CONFIG_SECTION: {"mode", "rl.steps"},
    }


def test_every_cli_flag_has_a_reference_entry():
    entries = reference_entries(REFERENCE.read_text(encoding="utf-8"))
    missing = [f"{section} {flag}" for section, flags in cli_flags().items()
               for flag in sorted(flags - entries.get(section, set()))]
    assert not missing, (
        f"docs/reference.md has no entry for {len(missing)} flag(s): {', '.join(missing)}. Add a line "
        "'- `--flag` VALUE: what it does' under the section '## `inspo COMMAND`'"
    )


def test_every_config_key_has_a_reference_entry():
    documented = reference_entries(REFERENCE.read_text(encoding="utf-8")).get(CONFIG_SECTION, set())
    missing = sorted(config_keys() - documented)
    assert not missing, (
        f"docs/reference.md has no entry for {len(missing)} config key(s): {', '.join(missing)}. Add a line "
        "'- `section.key` (default `...`): what it does' under '## Config keys'"
    )


def test_every_reference_entry_names_a_flag_or_key_that_exists():
    entries = reference_entries(REFERENCE.read_text(encoding="utf-8"))
    real = {**cli_flags(), CONFIG_SECTION: config_keys()}
    stale = [f"{section}: {name}" for section, names in entries.items() if section in real
             for name in sorted(names - real[section])]
    unknown_sections = [s for s, names in entries.items() if names and s not in real and s not in FREE_SECTIONS]
    assert not stale, f"docs/reference.md documents what the code does not have: {', '.join(stale)}"
    assert not unknown_sections, (f"docs/reference.md has entries under sections that are neither a command, "
                                  f"'{CONFIG_SECTION}' nor one of {FREE_SECTIONS}: {unknown_sections}")


# ------------------------------------------------------------------------------ Python blocks
@dataclass(frozen=True)
class Block:
    """One fenced block of a Markdown file; ``no_run`` is the marker's reason, or None."""

    path: Path
    line: int  # of the opening fence, 1-based
    code: str
    no_run: str | None
    lang: str = "python"
    file: str | None = None  # the name it is written as for the page's later blocks (a file marker)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def fenced_blocks(path: Path, text: str | None = None) -> list[Block]:
    """Every fenced block of a Markdown file, each with its language and the no-run or file marker
    right before its fence.

    Raises ValueError for a fence left open, a no-run marker without a reason, a file marker
    without a plain relative file name, or a marker that is not right before a Python block (a
    marker that silences nothing is a mistake)."""
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        marker = NO_RUN.match(lines[i].strip())
        file_marker = FILE.match(lines[i].strip())
        if marker and not marker.group("why").strip():
            raise ValueError(f"{path}:{i + 1}: a no-run marker must say why: <!-- no-run: why -->")
        if file_marker and not re.fullmatch(r"[\w-]+(\.[\w-]+)*", file_marker.group("name")):
            raise ValueError(f"{path}:{i + 1}: a file marker names a file of the block's folder: <!-- file: my_env.py -->")
        if marker or file_marker:
            kind = "no-run" if marker else "file"
            nxt = _FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
            if not nxt or nxt.group("lang").lower() not in PYTHON_FENCES:
                raise ValueError(f"{path}:{i + 1}: a {kind} marker must be on the line right before a ```python fence")
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m.group("fence"), i
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(m.group("indent")):])
            i += 1
        if i == len(lines):
            raise ValueError(f"{path}:{start + 1}: a {fence} fence is never closed")
        i += 1
        previous = NO_RUN.match(lines[start - 1].strip()) if start > 0 else None
        named = FILE.match(lines[start - 1].strip()) if start > 0 else None
        blocks.append(Block(path, start + 1, "\n".join(body) + "\n",
                            previous.group("why").strip() if previous else None, m.group("lang").lower(),
                            named.group("name") if named else None))
    return blocks


def python_blocks(path: Path, text: str | None = None) -> list[Block]:
    """The Python blocks of a Markdown file (see :func:`fenced_blocks`)."""
    return [b for b in fenced_blocks(path, text) if b.lang in PYTHON_FENCES]


def all_blocks() -> list[Block]:
    return [b for path in doc_files() for b in python_blocks(path)]


def test_blocks_and_markers_are_found_as_documented(tmp_path):
    md = tmp_path / "x.md"
    text = ("```bash\nls\n```\n\n```python\nprint(1)\n```\n"
            "<!-- no-run: needs a GPU -->\n```python\nimport torch\n```\n\n```py\n  x = 1\n```\n")
    blocks = python_blocks(md, text)
    assert [(b.line, b.code, b.no_run) for b in blocks] == [
        (5, "print(1)\n", None), (9, "import torch\n", "needs a GPU"), (13, "  x = 1\n", None)]
    with pytest.raises(ValueError, match="must say why"):
        python_blocks(md, "<!-- no-run: -->\n```python\npass\n```\n")
    with pytest.raises(ValueError, match="right before"):
        python_blocks(md, "<!-- no-run: slow -->\n\n```python\npass\n```\n")
    with pytest.raises(ValueError, match="never closed"):
        python_blocks(md, "```python\npass\n")
    named = python_blocks(md, "<!-- file: my_env.py -->\n```python\nX = 1\n```\n```python\nfrom my_env import X\n```\n")
    assert [(b.line, b.file, b.no_run) for b in named] == [(2, "my_env.py", None), (5, None, None)]
    with pytest.raises(ValueError, match="file marker must be on the line right before"):
        python_blocks(md, "<!-- file: a.py -->\n```bash\nls\n```\n")
    with pytest.raises(ValueError, match="names a file"):
        python_blocks(md, "<!-- file: ../a.py -->\n```python\npass\n```\n")


def test_docs_have_runnable_python_blocks_and_every_no_run_block_says_why():
    blocks = all_blocks()  # raises on a bad marker or an open fence
    runnable = [b for b in blocks if b.no_run is None]
    skipped = [b for b in blocks if b.no_run is not None]
    print(f"{len(blocks)} Python blocks: {len(runnable)} run, {len(skipped)} marked no-run: "
          + "; ".join(f"{b.where} ({b.no_run})" for b in skipped))
    assert runnable, "README.md and docs/*.md have no runnable Python block: the extraction is broken"


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.no_run is None], ids=lambda b: b.where)
def test_python_block_runs(block: Block, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    for earlier in python_blocks(block.path):  # the page's files written so far (file markers)
        if earlier.file and earlier.line < block.line:
            (tmp_path / earlier.file).write_text(earlier.code, encoding="utf-8")
    script = tmp_path / "block.py"
    script.write_text(block.code, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, (
        f"the Python block at {block.where} failed (exit {done.returncode}); fix it, or mark it "
        f"'<!-- no-run: why -->' if it cannot run here:\n{done.stderr[-3000:]}"
    )


# ------------------------------------------------------------------------------ shell commands
SHELL_FENCES = ("bash", "sh", "shell", "console")


def inspo_commands(block: Block) -> list[list[str]]:
    """The argument lists of the ``inspo ...`` command lines of a shell block (continuation lines
    joined, comments and ``...`` placeholders dropped; ``$(which inspo)`` counts as ``inspo``; a
    redirection or pipe ends the command: ``inspo ask RUN < questions.txt``)."""
    import shlex

    commands = []
    for line in block.code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        words = ["inspo" if w == "$(which" else w for w in words if w not in ("...", "inspo)")]
        if "inspo" in words:
            command = words[words.index("inspo") + 1:]
            ends = [i for i, w in enumerate(command) if w in ("<", ">", ">>", "|", "2>&1")]
            commands.append(command[:ends[0]] if ends else command)
    return commands


def test_inspo_commands_are_read_from_shell_blocks():
    block = Block(REPO / "x.md", 1, "inspo train --dry-run   # a comment\n"
                  "accelerate launch --config_file c.yaml $(which inspo) train --preset paper ...\n"
                  "inspo eval --set env.topk=2 \\\n    --limit 5\ncurl -s localhost\n"
                  "inspo ask runs/x < questions.txt\n", None, "bash")
    assert inspo_commands(block) == [["train", "--dry-run"], ["train", "--preset", "paper"],
                                     ["eval", "--set", "env.topk=2", "--limit", "5"], ["ask", "runs/x"]]


def command_settings(args: argparse.Namespace) -> list[str]:
    """The ``--set`` strings a parsed command line resolves: ``--env NAME`` first (``inspo data
    calculator``: the calculator's), then its ``--set`` overrides. A user's environment
    (``module:attr``) is not imported here: its ``env.*`` settings are left out (its factory checks
    them when it is called), and the rest resolve over the default environment."""
    from inspo.envs.registry import BUILTINS

    env = getattr(args, "env", None) or ("calculator" if getattr(args, "dataset", None) == "calculator" else None)
    overrides = list(getattr(args, "overrides", None) or [])
    if env in BUILTINS:
        return [f"env.name={env}", *overrides]
    if env:
        return [o for o in overrides if not o.startswith("env.")]
    return overrides


def test_command_settings_put_the_environment_first():
    from inspo.cli import build_parser

    def settings(*argv: str) -> list[str]:
        return command_settings(build_parser().parse_args(list(argv)))

    assert settings("train", "--env", "calculator", "--set", "env.steps=3") == ["env.name=calculator", "env.steps=3"]
    assert settings("train", "--env", "my_env:load", "--set", "env.x=1", "--set", "rl.steps=2") == ["rl.steps=2"]
    assert settings("data", "calculator", "--out", "d", "--set", "env.steps=3") == ["env.name=calculator", "env.steps=3"]
    assert settings("eval", "--set", "env.topk=2") == ["env.topk=2"]


def test_every_inspo_command_in_the_docs_parses_and_its_settings_exist(capsys):
    """Each documented ``inspo`` command line is parsed by the real parser (flags, choices, types),
    and its ``--env`` and ``--set`` overrides resolve over its preset (keys and values validated;
    :func:`command_settings`)."""
    from inspo.cli import build_parser
    from inspo.config.train import resolve

    commands = [(b, argv) for path in doc_files() for b in fenced_blocks(path) if b.lang in SHELL_FENCES
                for argv in inspo_commands(b)]
    assert len(commands) >= 10, f"found only {len(commands)} inspo command lines in the docs: the extraction is broken"
    bad = []
    for block, argv in commands:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit:
            bad.append(f"{block.where}: inspo {' '.join(argv)}: {capsys.readouterr().err.strip().splitlines()[-1]}")
            continue
        settings = command_settings(args)
        if settings:
            try:
                resolve(getattr(args, "preset", None) or "cpu-tiny", None, settings)
            except ValueError as exc:
                bad.append(f"{block.where}: inspo {' '.join(argv)}: {exc}")
    assert not bad, "documented inspo commands the code refuses:\n" + "\n".join(bad)


def test_every_relative_link_in_the_docs_points_at_a_file_that_exists():
    broken = []
    for path in doc_files():
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            if not (path.parent / target.split("#")[0]).exists():
                broken.append(f"{path.relative_to(REPO)}: {target}")
    assert not broken, f"links to files that do not exist: {broken}"
