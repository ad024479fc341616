"""The test host's stub of the TMInterface 2 API against the API's public declaration file."""
from __future__ import annotations

import subprocess
from pathlib import Path

from .tmi_api import mismatches, parse_host_dump, parse_predefined

DECLARATIONS = Path(__file__).parent / "data" / "tmi2_api.predefined"


def host_api(binary: Path) -> str:
    return subprocess.run([str(binary), "--dump-api"], capture_output=True, text=True, timeout=30, check=True).stdout


def test_every_host_registration_is_declared_by_the_tmi_api(tmi_host_binary):
    """Each function, method, property, constructor, enum value and funcdef of the host stub has the
    name, return type, parameter types and value of the public TMInterface 2 declaration, so a
    plugin that compiles in the host calls the API as declared."""
    dump = host_api(tmi_host_binary)
    registered = parse_host_dump(dump)
    assert len(registered.methods) > 20 and len(registered.enums) > 20, dump
    assert mismatches(registered, parse_predefined(DECLARATIONS.read_text())) == []


def test_the_check_catches_a_mistyped_or_misnumbered_stub(tmi_host_binary):
    """The comparison is not vacuous: a wrong parameter type, enum value or name is reported."""
    declared = parse_predefined(DECLARATIONS.read_text())
    dump = host_api(tmi_host_binary)
    for good, bad in [
        ("void SetInputState(InputType, int)", "void SetInputState(InputType, uint)"),
        ("InputType|Left=2", "InputType|Left=0"),
        ("TM::GameState|Menus=32", "TM::GameState|Menus=1"),
        ("string get_RemoteIP()", "string get_RemoteIp()"),
        ("uint64 get_Now()", "uint get_Now()"),
    ]:
        assert good in dump, good
        assert mismatches(parse_host_dump(dump.replace(good, bad)), declared), bad


def test_declaration_parser_reads_the_wheel_order_and_enums():
    """The vendored declarations give SimulationWheels' order and TMInterface's enum values."""
    declared = parse_predefined(DECLARATIONS.read_text())
    getters = [name for (cls, name) in declared.methods if cls == "SimulationWheels" and name.startswith("get_")]
    assert getters == ["get_FrontLeft", "get_FrontRight", "get_BackRight", "get_BackLeft"]
    assert declared.enums[("InputType", "Up")] == 1 and declared.enums[("TM::GameState", "LocalRace")] == 512
