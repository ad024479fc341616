"""rulka/machine.py: what a run folder records of its machine, so that runs compare only beside it."""
from __future__ import annotations

import os

import yaml

from rulka.machine import VECTOR_FLAGS, cpu_flags, describe_machine, machine_line, record_resume, run_machines_line

AVX2_ONLY = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx2 fma\n\n" \
            "processor\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx2 fma\n"
BF16 = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16\n"


def test_cpu_flags_reads_the_wanted_flags_in_order(tmp_path):
    """The vector units come from the first flags line, in VECTOR_FLAGS' order; none without a file."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(BF16)
    assert cpu_flags(cpuinfo=cpuinfo) == list(VECTOR_FLAGS)
    assert cpu_flags(("amx_bf16", "avx2"), cpuinfo) == ["amx_bf16", "avx2"]
    cpuinfo.write_text(AVX2_ONLY)
    assert cpu_flags(cpuinfo=cpuinfo) == ["avx2"]
    assert cpu_flags(cpuinfo=tmp_path / "absent") == []


def test_describe_machine_names_cpu_cores_units_and_torch(tmp_path):
    """The record holds the CPU's model, the cores this process may use, its vector units and torch's version."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(AVX2_ONLY)
    machine = describe_machine(cpuinfo)
    assert machine["cpu"] == "AMD EPYC"
    assert machine["cores"] == len(os.sched_getaffinity(0))
    assert machine["vector_units"] == ["avx2"]
    assert machine["torch"]
    assert describe_machine(tmp_path / "absent")["cpu"] == "unknown"


def test_describe_machine_is_plain_yaml(tmp_path):
    """run_info.yaml is written with yaml.safe_dump: every value is a plain type (torch's version is a
    str subclass that safe_dump refuses), and it reads back unchanged."""
    machine = describe_machine()
    assert yaml.safe_load(yaml.safe_dump(machine)) == machine
    assert type(machine["torch"]) is str


def test_machine_line_says_what_the_cpu_lacks_and_what_was_not_recorded():
    """The table's line names the units a CPU lacks (what made it slower), and says so for old run folders."""
    line = machine_line({"cpu": "AMD EPYC", "cores": 2, "vector_units": ["avx2"], "torch": "2.13.0", "cuda": None})
    assert line == "AMD EPYC, 2 cores, avx2 (no avx512f, avx512_bf16, amx_bf16), torch 2.13.0"
    full = machine_line({"cpu": "X", "cores": 16, "vector_units": list(VECTOR_FLAGS), "torch": "2.13.0",
                         "cuda": "NVIDIA H200"})
    assert full == "X, 16 cores, avx2, avx512f, avx512_bf16, amx_bf16, torch 2.13.0, NVIDIA H200"
    assert machine_line(None).startswith("not recorded")


def test_a_run_resumed_on_another_machine_names_both():
    """A resume appends the step and machine it continued on; the table's line names a machine only
    where it changed, so a run's later minutes are not credited to its first machine."""
    slow = {"cpu": "AMD EPYC", "cores": 2, "vector_units": ["avx2"], "torch": "2.13.0", "cuda": None}
    fast = {**slow, "cpu": "Intel Xeon", "cores": 16}
    info = {"preset": "p", "machine": slow}
    same = record_resume(info, 1000, slow)
    assert same["resumed"] == [{"env_steps": 1000, "machine": slow}] and "resumed" not in info
    assert run_machines_line(same) == machine_line(slow)
    moved = record_resume(same, 300_000, fast)
    assert len(moved["resumed"]) == 2
    assert run_machines_line(moved) == f"{machine_line(slow)}; resumed at 300000 actions on {machine_line(fast)}"
    assert yaml.safe_load(yaml.safe_dump(record_resume(info, 5))) == record_resume(info, 5, describe_machine())
