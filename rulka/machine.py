"""The machine a run trained on, as a run folder records it (``run_info.yaml``'s ``machine``).

Schedules count actions and budgets count minutes, so what a run learns in its minutes depends on how
fast its machine plays: two runs compare only with their machines beside them. A run records its CPU,
the cores it may use, the CPU's vector units that decide its learner's speed (AVX2, AVX-512, and the
bf16 units that ``performance.precision: auto`` looks for), torch's version and the CUDA device if any.
A resumed run adds each machine it continued on (``resumed``), since its later minutes ran there.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

#: CPU flags (``/proc/cpuinfo``) that set how fast a CPU learns: float32 vector width, then bf16 units.
VECTOR_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
CPUINFO = Path("/proc/cpuinfo")


def _cpuinfo_field(name: str, cpuinfo: str | Path) -> str | None:
    """The value of the first ``name : value`` line of ``cpuinfo`` (None where there is none or nothing to read)."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == name:
            return value.strip()
    return None


def cpu_flags(wanted: tuple[str, ...] = VECTOR_FLAGS, cpuinfo: str | Path = CPUINFO) -> list[str]:
    """Which of ``wanted`` this CPU reports, in ``wanted``'s order (empty where nothing can be read)."""
    flags = set((_cpuinfo_field("flags", cpuinfo) or "").split())
    return [flag for flag in wanted if flag in flags]


def describe_machine(cpuinfo: str | Path = CPUINFO) -> dict:
    """What ``run_info.yaml`` records of this machine: ``cpu`` (model name), ``cores`` (those this
    process may run on), ``vector_units`` (of :data:`VECTOR_FLAGS`), ``torch`` and ``cuda`` (the first
    CUDA device's name, or None)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # (not Linux)
        cores = os.cpu_count() or 0
    return {"cpu": _cpuinfo_field("model name", cpuinfo) or "unknown", "cores": cores,
            "vector_units": cpu_flags(cpuinfo=cpuinfo), "torch": str(torch.__version__),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def machine_line(machine: dict | None) -> str:
    """One line for a table's reader, e.g. ``AMD EPYC, 2 cores, avx2 (no avx512f, avx512_bf16,
    amx_bf16), torch 2.13.0``; for a run folder from before runs recorded it, says so."""
    if not machine:
        return "not recorded (run folders record their machine since 2026-12-03)"
    units = list(machine.get("vector_units") or [])
    missing = [flag for flag in VECTOR_FLAGS if flag not in units]
    line = f"{machine.get('cpu', 'unknown')}, {machine.get('cores', '?')} cores, {', '.join(units) or 'no avx2'}"
    if missing:
        line += f" (no {', '.join(missing)})"
    line += f", torch {machine.get('torch', '?')}"
    return line + (f", {machine['cuda']}" if machine.get("cuda") else "")


def record_resume(info: dict, env_steps: int, machine: dict | None = None) -> dict:
    """``info`` (a run's ``run_info.yaml``) with one more ``resumed`` entry: the environment steps the run
    resumed at and the machine it continues on (this one unless given)."""
    entry = {"env_steps": int(env_steps), "machine": machine if machine is not None else describe_machine()}
    return {**info, "resumed": [*(info.get("resumed") or []), entry]}


def run_machines_line(info: dict) -> str:
    """:func:`machine_line` of the machine a run started on, then each other machine it was resumed on
    and from which environment step, e.g. ``... ; resumed at 300000 actions on Intel ..., 16 cores ...``."""
    line = machine_line(info.get("machine"))
    previous = info.get("machine")
    for entry in info.get("resumed") or []:
        if entry.get("machine") != previous:
            line += f"; resumed at {entry.get('env_steps', '?')} actions on {machine_line(entry.get('machine'))}"
            previous = entry.get("machine")
    return line
