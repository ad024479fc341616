r"""Every parameter of a configuration with its documentation, read from the dataclasses themselves.

A parameter documents itself with an attribute docstring, the string literal right under the field
(Sphinx reads the same strings)::

    batch_size: int = 512
    \"""Transitions sampled from the replay memory for one gradient step. ...

    Unit: transitions | Range: 32-512 | See: memory.number_times_single_memory_is_used_before_discard
    \"""

The text before the tag line is the meaning (trade-offs included). The tag line is optional and
holds ``Tag: value`` parts separated by `` | ``:

* ``Unit``: the unit of the value (``ms``, ``transitions``, ``none`` for a ratio or a count-free factor);
* ``Range``: the typical range, as advice (the valid range is the rule declared with the field,
  ``param(default, RULE)``, see :mod:`rulka.rules`);
* ``See``: the keys (``section.key``) this parameter interacts with;
* ``Section``: the YAML section of the configuration guide that also holds this key, when the
  config class routes that section here (``yaml_routes``; e.g. ``rewards`` for TrackMania's rewards).

Type and default come from the dataclass, never from the text. A subclass that only changes a
default inherits its base's documentation; one that documents the field again replaces it. Read-only
properties of a section (``ms_per_action``) are listed as derived values, documented by their
docstring in the same format.

:func:`parameter_rows` walks a configuration; :func:`undocumented` lists what lacks docs;
:mod:`rulka.params_command` renders the rows (``rulka params PRESET``, ``docs/configuration.md``).
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
import types
import typing
from dataclasses import dataclass
from typing import Any, Iterator, Union

from rulka.rules import field_rule
from rulka.schedules import Schedule

TAGS = ("Unit", "Range", "See", "Section")


@dataclass(frozen=True)
class FieldDoc:
    """The documentation of one parameter, parsed from its docstring."""

    meaning: str
    unit: str = ""
    range: str = ""
    see: tuple[str, ...] = ()
    section: str = ""


class DocFormatError(ValueError):
    """A parameter docstring whose tag line cannot be read."""


def parse_doc(text: str, where: str = "") -> FieldDoc:
    """Split a docstring into its meaning and its tags (see the module docstring)."""
    meaning_lines: list[str] = []
    tags: dict[str, str] = {}
    for line in inspect.cleandoc(text).splitlines():
        parts = [p.strip() for p in line.split(" | ")]
        if parts and all(_tag_of(p) for p in parts):
            for part in parts:
                tag, _, value = part.partition(":")
                if tag in tags:
                    raise DocFormatError(f"{where}: tag '{tag}' given twice")
                tags[tag] = value.strip()
        elif any(_tag_of(p) for p in parts) and len(parts) > 1:
            raise DocFormatError(f"{where}: a tag line holds only 'Tag: value' parts separated by ' | ' "
                                 f"(tags: {', '.join(TAGS)}), got {line.strip()!r}")
        else:
            meaning_lines.append(line)
    meaning = " ".join(" ".join(meaning_lines).split()).replace("``", "`")
    see = tuple(s.strip() for s in tags.get("See", "").split(",") if s.strip())
    return FieldDoc(meaning, tags.get("Unit", ""), tags.get("Range", ""), see, tags.get("Section", ""))


def _tag_of(part: str) -> str:
    tag, colon, _ = part.partition(":")
    return tag if colon and tag in TAGS else ""


@functools.lru_cache(maxsize=None)
def _class_docstrings(klass: type) -> dict[str, str]:
    """``{field: docstring}`` for the attribute docstrings written in ``klass``'s own body."""
    try:
        source = textwrap.dedent(inspect.getsource(klass))
    except (OSError, TypeError):
        return {}
    tree = ast.parse(source)
    body = next((n.body for n in tree.body if isinstance(n, ast.ClassDef)), [])
    docs: dict[str, str] = {}
    for node, following in zip(body, body[1:] + [None]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if (isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)):
                docs[node.target.id] = following.value.value
    return docs


def field_doc(owner: type, name: str) -> FieldDoc | None:
    """The documentation of field ``name`` of dataclass ``owner``: the nearest class in its MRO
    that documents it; for a property, its docstring. None when nothing documents it."""
    for klass in owner.__mro__:
        attribute = klass.__dict__.get(name)
        if isinstance(attribute, property):
            return parse_doc(attribute.__doc__, f"{klass.__name__}.{name}") if attribute.__doc__ else None
        text = _class_docstrings(klass).get(name)
        if text is not None:
            return parse_doc(text, f"{klass.__name__}.{name}")
    return None


# ---------------------------------------------------------------------------------------------
# Walking a configuration
# ---------------------------------------------------------------------------------------------

_UNCHANGED = object()


@dataclass(frozen=True)
class ParameterRow:
    """One parameter of a configuration as ``rulka params`` shows it.

    ``key`` is the path a YAML file or ``-cp`` uses (``training.batch_size``; ``map_cycle.entries[].repeat``
    for a field of each item of a list). ``derived`` rows are read-only values computed from others.
    ``yaml_key`` is the key the configuration guide writes when it differs (a routed section);
    ``settable`` is False for fields that no YAML key reaches.
    """

    key: str
    owner: type
    name: str
    value: Any
    default: Any
    type_name: str
    doc: FieldDoc | None
    valid: str
    derived: bool = False
    yaml_key: str = ""
    settable: bool = True
    note: str = ""
    preset_value: Any = _UNCHANGED
    """The value the preset itself sets, when ``--config`` or ``-cp`` changed it."""

    @property
    def changed_by_flags(self) -> bool:
        """Whether ``--config`` or ``-cp`` changed the preset's value (then ``preset_value`` holds it)."""
        return self.preset_value is not _UNCHANGED

    @property
    def section(self) -> str:
        """The configuration guide's section this row belongs to (its YAML key's first part)."""
        return (self.yaml_key or self.key).split(".")[0]


_NO_DEFAULT = object()


def parameter_rows(config: Any) -> list[ParameterRow]:
    """Every parameter of ``config`` (a dataclass instance), sections in field order."""
    routes: dict[str, str] = getattr(type(config), "yaml_routes", {})
    routed_away = {src for src in routes if "." not in src}
    rows: list[ParameterRow] = []
    notes = _notes(config, "")
    for f in _public_fields(config):
        value = getattr(config, f.name)
        if _is_section(value):
            rows.extend(_section_rows(value, f.name, routes, settable=f.name not in routed_away))
            notes.update(_notes(value, f"{f.name}."))
        else:
            rows.append(_field_row(type(config), f, value, f.name, routes, settable=True))
    return [dataclasses.replace(row, note=notes[row.key]) if row.key in notes else row for row in rows]


def _notes(obj: Any, prefix: str) -> dict[str, str]:
    """Explanations computed from the current values: ``obj.parameter_notes()`` maps a key (a
    field or property name for a section, ``section.key`` for a whole config) to a sentence."""
    method = getattr(obj, "parameter_notes", None)
    return {f"{prefix}{key}": text for key, text in method().items()} if callable(method) else {}


def _section_rows(section: Any, path: str, routes: dict[str, str], settable: bool) -> Iterator[ParameterRow]:
    owner = type(section)
    hints = typing.get_type_hints(owner)
    for f in _public_fields(section):
        value, key = getattr(section, f.name), f"{path}.{f.name}"
        if _is_section(value):
            yield from _section_rows(value, key, routes, settable)
            continue
        yield _field_row(owner, f, value, key, routes, settable)
        item_class = _list_item_dataclass(hints[f.name])
        if item_class is not None:
            yield from _item_rows(item_class, value, f"{key}[]", settable)
    for name in _properties(owner):
        try:
            value = getattr(section, name)
            default = getattr(owner(), name)
        except Exception as error:  # a derived value that the current settings cannot compute
            value = default = f"(cannot compute: {error})"
        yield ParameterRow(f"{path}.{name}", owner, name, value, default, _type_name(type(value)),
                           field_doc(owner, name), "derived (read-only)", derived=True, settable=False)


def _item_rows(item_class: type, items: list, path: str, settable: bool) -> Iterator[ParameterRow]:
    """One row per field of a list's item dataclass; the value lists that field of every item."""
    hints = typing.get_type_hints(item_class)
    for f in dataclasses.fields(item_class):
        if not f.init or f.name.startswith("_"):
            continue
        values = [getattr(item, f.name) for item in items]
        yield ParameterRow(f"{path}.{f.name}", item_class, f.name, values, _default_of(f), _type_name(hints[f.name]),
                           field_doc(item_class, f.name), _valid(item_class, f.name), settable=settable)


def _field_row(owner: type, f: dataclasses.Field, value: Any, key: str, routes: dict[str, str],
               settable: bool) -> ParameterRow:
    doc = field_doc(owner, f.name)
    yaml_key = next((src for src, dst in routes.items() if dst == key), "")
    if not yaml_key and doc is not None and doc.section and routes.get(doc.section) == key.split(".")[0]:
        yaml_key = f"{doc.section}.{f.name}"
    return ParameterRow(key, owner, f.name, value, _default_of(f), _type_name(typing.get_type_hints(owner)[f.name]),
                        doc, _valid(owner, f.name), yaml_key=yaml_key, settable=settable)


def _valid(owner: type, name: str) -> str:
    """The *valid* range: the requirement of the rule declared beside the field (:mod:`rulka.rules`)."""
    rule = field_rule(owner, name)
    return rule.requirement if rule is not None else ""


def _public_fields(obj: Any) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(obj) if f.init and not f.name.startswith("_")]


def _is_section(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, (type, Schedule))


def _is_section_type(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint) and hint is not Schedule


def _properties(owner: type) -> list[str]:
    """Public properties of a section class, in definition order (bases first)."""
    names: list[str] = []
    for klass in reversed(owner.__mro__):
        for name, attribute in vars(klass).items():
            if isinstance(attribute, property) and not name.startswith("_") and name not in names:
                names.append(name)
    return names


def _list_item_dataclass(hint: Any) -> type | None:
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint) or (None,)
        if isinstance(item, type) and dataclasses.is_dataclass(item):
            return item
    return None


def _default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return _NO_DEFAULT


def _type_name(hint: Any) -> str:
    if hint is type(None):
        return "None"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_name(a) for a in args)}]"
    if hint is Any:
        return "Any"
    return getattr(hint, "__name__", str(hint))


def undocumented(config_or_class: Any, require_unit_and_range: bool = True) -> list[str]:
    """Problems of the documentation of every parameter: a field or derived value without a
    docstring, a numeric one without ``Unit`` or ``Range``, a tag line that cannot be read.

    ``config_or_class`` is a configuration (walked like :func:`parameter_rows`) or a dataclass (its
    own fields only, e.g. a class no preset uses).
    """
    if isinstance(config_or_class, type):
        hints = typing.get_type_hints(config_or_class)
        pairs = [(f"{config_or_class.__name__}.{f.name}", config_or_class, f.name, hints[f.name])
                 for f in dataclasses.fields(config_or_class) if f.init and not f.name.startswith("_")
                 and not _is_section_type(hints[f.name])]  # a section is documented by its class
    else:
        pairs = [(row.key, row.owner, row.name, _hint_of(row)) for row in parameter_rows(config_or_class)]
    problems = []
    for key, owner, name, hint in pairs:
        try:
            doc = field_doc(owner, name)
        except DocFormatError as error:
            problems.append(str(error))
            continue
        where = _defining_module(owner, name)
        if doc is None or not doc.meaning:
            problems.append(f"{key}: no documentation (write a docstring under the field in {where})")
        elif require_unit_and_range and _is_numeric(hint) and not (doc.unit and doc.range):
            missing = " and ".join(t for t, v in (("Unit", doc.unit), ("Range", doc.range)) if not v)
            problems.append(f"{key}: numeric parameter without {missing} (add a tag line "
                            f"'Unit: ... | Range: ...' to its docstring in {where})")
    return problems


def _defining_module(owner: type, name: str) -> str:
    """The module of the base-most class that declares ``name`` (where its docstring belongs)."""
    declaring = [k for k in owner.__mro__ if name in vars(k).get("__annotations__", {}) or
                 isinstance(vars(k).get(name), property)]
    return (declaring[-1] if declaring else owner).__module__


def _hint_of(row: ParameterRow) -> Any:
    if row.derived:
        return type(row.value)
    return typing.get_type_hints(row.owner)[row.name]


def _is_numeric(hint: Any) -> bool:
    """int, float, a schedule, or an optional / a list of those (not bool)."""
    if hint is bool:
        return False
    if hint in (int, float, Schedule):
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType, list, tuple):
        return any(_is_numeric(a) for a in args if a is not type(None))
    return False


# ---------------------------------------------------------------------------------------------
# Values and sections as text
# ---------------------------------------------------------------------------------------------

def format_value(value: Any) -> str:
    """A short, deterministic text for a parameter value (YAML-like)."""
    if value is _NO_DEFAULT:
        return "(required)"
    if isinstance(value, Schedule):
        knots = ", ".join(f"[{_number(s)}, {format_value(v)}]" for s, v in value.points)
        counter = "" if value.counter == "env_steps" else f", {value.counter}"
        return f"[{knots}] ({value.interpolation}{counter})"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        inner = ", ".join(f"{f.name}: {format_value(getattr(value, f.name))}" for f in _public_fields(value))
        return "{" + inner + "}"
    if isinstance(value, list) and value and all(_is_section(v) for v in value):
        return f"{len(value)} entries (their fields are listed one by one)"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return '""' if value == "" else (repr(value) if any(c in value for c in ",[]{}: ") else value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _number(step: Any) -> str:
    return f"{step:g}" if isinstance(step, float) else str(step)


def section_intros(config: Any) -> dict[str, list[str]]:
    """The docstring of each section's class, as the paragraphs that open its part of the document."""
    intros: dict[str, list[str]] = {}
    for f in _public_fields(config):
        value = getattr(config, f.name)
        doc = inspect.getdoc(type(value)) if _is_section(value) else None
        if doc:
            intros[f.name] = [" ".join(p.split()).replace("``", "`") for p in doc.split("\n\n")]
    return intros
