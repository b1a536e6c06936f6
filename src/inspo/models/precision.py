"""Which precision is fast on this machine, and what ``"auto"`` means (torch imported lazily).

bf16 halves memory everywhere, but it is only *fast* where the hardware multiplies in bf16:
CUDA GPUs from Ampere on, and CPUs whose oneDNN has a bf16 kernel (AVX512 cores, AVX512-BF16,
AMX). On a CPU with AVX2 alone torch falls back to a scalar bf16 GEMM: on an AMD EPYC (AVX2)
one thread ran a 2048x896 @ 896x4864 matmul at 0.8 GFLOP/s in bf16 against 78 in float32
(``benchmarks/speed/precision.py``, BENCHMARKS.md). So ``"auto"`` picks bf16 only where it is fast:

- ``model.dtype`` (weights) ``"auto"`` -> ``"bfloat16"`` where bf16 is fast, else ``"float32"``;
- ``rl.bf16`` (TRL's bf16 autocast of the training compute) ``"auto"`` -> true where bf16 is
  fast, else false.

An explicit ``bfloat16`` / ``rl.bf16=true`` is obeyed everywhere; on a device without fast bf16
:meth:`Precision.warnings` says it may run tens of times slower and how to change it.

Every entry (train, evolve, eval, ask, a local optimizer LLM) resolves its precision once with
:func:`resolve_precision` and logs :meth:`Precision.line`; what it records (``config.yaml``,
``agent.json``) is the resolved value, never ``"auto"``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: Weights dtypes a setting may name ("auto" resolves to one of the first two).
DTYPES = ("auto", "bfloat16", "float32", "float16")


@dataclass(frozen=True)
class Bf16Support:
    """Whether bf16 matmuls are fast on a device, and why (for the log)."""

    fast: bool
    why: str
    """e.g. ``"CPU AVX2: no fast bf16 matmul"``."""


#: ``probe(device) -> Bf16Support``; tests inject one so they do not depend on the machine.
Probe = Callable[[str], Bf16Support]


def probe_bf16(device: str) -> Bf16Support:
    """The machine's answer for ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"`` …).

    CUDA: ``torch.cuda.is_bf16_supported()``. CPU: oneDNN's bf16 support
    (``torch.ops.mkldnn._is_mkldnn_bf16_supported()``; False where this torch lacks the op),
    named with ``torch.backends.cpu.get_cpu_capability()``. Any other device: not fast.
    """
    import torch

    kind = str(device).split(":", 1)[0]
    if kind == "cuda":
        if not torch.cuda.is_available():
            return Bf16Support(False, "no CUDA device is visible")
        name = torch.cuda.get_device_name(torch.device(device))
        if torch.cuda.is_bf16_supported():
            return Bf16Support(True, f"CUDA {name}: bf16 supported")
        return Bf16Support(False, f"CUDA {name}: no bf16 support")
    if kind != "cpu":
        return Bf16Support(False, f"device {device!r}: bf16 speed unknown")
    capability = torch.backends.cpu.get_cpu_capability()
    try:
        fast = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch built without the op (or without oneDNN)
        fast = False
    if fast:
        return Bf16Support(True, f"CPU {capability}: oneDNN bf16 matmul")
    return Bf16Support(False, f"CPU {capability}: no fast bf16 matmul")


def bf16_support(device: str, *, probe: Probe | None = None) -> Bf16Support:
    """:func:`probe_bf16` or the injected ``probe``."""
    return (probe or probe_bf16)(device)


def fast_bf16(device: str, *, probe: Probe | None = None) -> bool:
    """Whether bf16 matmuls are fast on ``device``."""
    return bf16_support(device, probe=probe).fast


def resolve_dtype_setting(dtype: str, fast: bool) -> str:
    """``"auto"`` -> ``"bfloat16"`` where bf16 is ``fast``, else ``"float32"``; any other name as it
    is."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not supported; use one of {', '.join(DTYPES)}")
    if dtype == "auto":
        return "bfloat16" if fast else "float32"
    return dtype


def resolve_bf16_setting(bf16: bool | str, fast: bool) -> bool:
    """``rl.bf16``: ``"auto"`` -> ``fast``; true or false as they are."""
    if bf16 == "auto":
        return fast
    if not isinstance(bf16, bool):
        raise ValueError(f"bf16 must be true, false or auto; got {bf16!r}")
    return bf16


@dataclass(frozen=True)
class Precision:
    """The resolved precision of one entry: the weights dtype and the compute dtype."""

    dtype: str
    """Weights dtype, concrete (``"bfloat16"``, ``"float32"``, ``"float16"``)."""
    bf16: bool
    """Training: TRL's bf16 autocast (``rl.bf16`` resolved). False for inference."""
    support: Bf16Support
    asked_dtype: str
    """The setting as given (``"auto"`` or a dtype)."""
    asked_bf16: bool | str | None = None
    """``rl.bf16`` as given; None where nothing is trained."""
    dtype_key: str = "model.dtype"
    """How the user sets the weights dtype at this entry (``model.dtype``, ``--dtype``)."""
    bf16_key: str = "rl.bf16"
    note: str = ""
    """Why ``dtype`` is not what ``asked_dtype`` alone gives (a resume keeps its checkpoint's)."""

    @property
    def compute(self) -> str:
        return "bfloat16" if self.bf16 else self.dtype

    def describe(self) -> str:
        """e.g. ``weights float32, compute float32 (model.dtype=auto, rl.bf16=auto; CPU AVX2: no
        fast bf16 matmul)``."""
        asked = [f"{self.dtype_key}={self.asked_dtype}"]
        if self.asked_bf16 is not None:
            asked.append(f"{self.bf16_key}={_show(self.asked_bf16)}")
        note = f"; {self.note}" if self.note else ""
        return (
            f"weights {self.dtype}, compute {self.compute} ({', '.join(asked)}; "
            f"{self.support.why}{note})"
        )

    def line(self) -> str:
        """One line for the log: ``precision: `` and :meth:`describe`."""
        return f"precision: {self.describe()}"

    def warnings(self) -> list[str]:
        """What bf16 on a device without fast bf16 costs, and how to change it (only an explicit
        setting, or a checkpoint's weights, get there: ``"auto"`` never picks it)."""
        if self.support.fast:
            return []
        slow = []  # (setting, how to change it)
        if self.dtype == "bfloat16":
            slow.append(
                (
                    f"{self.dtype_key}=bfloat16",
                    f"{self.note}: a new run with {self.dtype_key}=auto would use float32 here"
                    if self.note
                    else f"set {self.dtype_key}=auto (here: float32) unless bf16 is what you want",
                )
            )
        if self.bf16:
            slow.append(
                (
                    f"{self.bf16_key}=true",
                    f"set {self.bf16_key}=auto (here: false) unless bf16 is what you want",
                )
            )
        return [
            f"{setting} on a device without fast bf16 ({self.support.why}): its matmuls may run "
            "tens of times slower than in float32 (benchmarks/speed/precision.py measures it); "
            f"{how}"
            for setting, how in slow
        ]


def resolve_precision(
    dtype: str,
    bf16: bool | str | None = None,
    *,
    device: str,
    probe: Probe | None = None,
    dtype_key: str = "model.dtype",
    bf16_key: str = "rl.bf16",
) -> Precision:
    """The precision of an entry on ``device``: ``dtype`` (weights) and, where it trains, ``bf16``
    (``rl.bf16``), ``"auto"`` resolved (module docstring). ``*_key``: the settings' names at this
    entry, for :meth:`Precision.line` and :meth:`Precision.warnings`. Raises ValueError for a
    value that is not a setting."""
    support = bf16_support(device, probe=probe)
    weights = resolve_dtype_setting(dtype, support.fast)
    autocast = False if bf16 is None else resolve_bf16_setting(bf16, support.fast)
    return Precision(
        dtype=weights,
        bf16=autocast,
        support=support,
        asked_dtype=dtype,
        asked_bf16=bf16,
        dtype_key=dtype_key,
        bf16_key=bf16_key,
    )


def play_precision(
    recorded: str,
    asked: str | None,
    *,
    device: str,
    probe: Probe | None = None,
    asked_key: str = "--dtype",
) -> Precision:
    """The precision a trained agent plays in (``inspo ask``): ``asked`` when given (``asked_key``
    names it); else the dtype it ``recorded`` (``agent.json``), except bf16 weights on a device
    without fast bf16, which play in float32 (an exact upcast of the weights; the compute is
    float32, so an answer may differ from bf16's in a rare near-tie)."""
    if asked is not None:
        return resolve_precision(asked, device=device, probe=probe, dtype_key=asked_key)
    support = bf16_support(device, probe=probe)
    if recorded == "bfloat16" and not support.fast:
        return Precision(
            "float32",
            False,
            support,
            asked_dtype=recorded,
            dtype_key="agent's dtype",
            note=f"its bf16 weights upcast to float32 here ({asked_key} bfloat16 keeps bf16)",
        )
    return resolve_precision(recorded, device=device, probe=probe, dtype_key="agent's dtype")


def concrete_dtype(dtype: str, device: str, *, probe: Probe | None = None) -> str:
    """``dtype`` with ``"auto"`` resolved for ``device`` (for loaders handed a setting; the entries
    call :func:`resolve_precision` first and pass the concrete name)."""
    if dtype == "auto":
        return resolve_dtype_setting(dtype, fast_bf16(device, probe=probe))
    return dtype


def default_device() -> str:
    """``"cuda"`` when a CUDA GPU is visible, else ``"cpu"`` (where inspo loads a local model)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _show(value: bool | str) -> str:
    return str(value).lower() if isinstance(value, bool) else value
