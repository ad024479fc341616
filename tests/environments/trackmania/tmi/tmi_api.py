"""Read the TMInterface 2 API declaration file and the test host's ``--dump-api`` into one comparable form.

Both describe functions, methods, properties, constructors, enum values and funcdefs. Names are
kept; types are normalised (spaces dropped, ``T[]`` written ``array<T>``, namespaces dropped, ``int32``
read as ``int``), parameter names and default values are dropped, so that a registration matches its
declaration when it has the same name, return type and parameter types.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

Signature = tuple[str, tuple[str, ...]]  # (return type, parameter types)


@dataclass
class Api:
    functions: dict[tuple[str, str], set[Signature]] = field(default_factory=dict)  # (namespace, name)
    methods: dict[tuple[str, str], set[Signature]] = field(default_factory=dict)  # (type, name)
    properties: dict[tuple[str, str], str] = field(default_factory=dict)  # (type, name) -> type
    constructors: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)  # type -> parameter types
    enums: dict[tuple[str, str], int] = field(default_factory=dict)  # (enum, value name) -> value
    funcdefs: dict[str, Signature] = field(default_factory=dict)


_IDENT = re.compile(r"^[A-Za-z_]\w*$")


def normalise_type(text: str) -> str:
    """``const string &in`` -> ``conststring&in``; ``uint8[]`` -> ``array<uint8>``; no namespaces."""
    t = text.strip()
    while re.search(r"(\w+)\[\]", t):
        t = re.sub(r"([\w:]+)\[\]", r"array<\1>", t)
    t = re.sub(r"\b[A-Za-z_]\w*\s*::\s*", "", t)  # TM::GameState -> GameState
    t = re.sub(r"\bint32\b", "int", t)
    return re.sub(r"\s+", "", t)


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def _param_type(param: str) -> str:
    p = _split_top(param, "=")[0].strip() if "=" in param else param.strip()
    tokens = p.split()
    if len(tokens) > 1 and _IDENT.match(tokens[-1]) and tokens[-2] != "const":
        p = " ".join(tokens[:-1])  # drop the parameter's name
    return normalise_type(p)


def parse_signature(decl: str) -> tuple[str, str, tuple[str, ...]]:
    """``'bool Write(const string&in data)'`` -> ``('bool', 'Write', ('conststring&in',))``."""
    decl = decl.strip().rstrip(";").strip()
    decl = re.sub(r"\)\s*(const)?\s*(property)?\s*$", ")", decl)
    open_at = decl.index("(")
    head, params = decl[:open_at].strip(), decl[open_at + 1 : decl.rindex(")")]
    name = re.search(r"([~A-Za-z_]\w*)$", head).group(1)  # type: ignore[union-attr]
    ret = normalise_type(head[: -len(name)])
    return ret, name, tuple(_param_type(p) for p in _split_top(params, ",") if p.strip())


def parse_predefined(text: str) -> Api:
    """Parse an ``as.predefined`` declaration file (namespaces, classes, enums, functions, funcdefs)."""
    api = Api()
    scopes: list[tuple[str, str]] = []  # (kind, name)
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"^(namespace|class|enum)\s+([\w:<>]+)\s*\{$", line)
        if m:
            scopes.append((m.group(1), re.sub(r"<.*>", "", m.group(2))))
            continue
        if line.startswith("}"):
            scopes.pop()
            continue
        namespace = "::".join(n for k, n in scopes if k == "namespace")
        kind, name = scopes[-1] if scopes else ("namespace", "")
        if kind == "enum":
            enum = f"{namespace}::{name}" if namespace else name
            for item in line.split(","):
                if "=" in item:
                    key, value = item.split("=")
                    api.enums[(enum, key.strip())] = int(value.replace(" ", ""))
            continue
        if kind == "class":
            cls = name
            if "(" not in line:  # property: "[const] type name;"
                tokens = line.rstrip(";").split()
                api.properties[(cls, tokens[-1])] = normalise_type(" ".join(t for t in tokens[:-1] if t != "const"))
                continue
            ret, fname, params = parse_signature(line)
            if fname == cls and not ret:
                api.constructors.setdefault(cls, set()).add(params)
            elif not fname.startswith("~"):
                api.methods.setdefault((cls, fname), set()).add((ret, params))
            continue
        if line.startswith("funcdef "):
            ret, fname, params = parse_signature(line[len("funcdef "):])
            api.funcdefs[fname] = (ret, params)
        elif "(" in line:
            ret, fname, params = parse_signature(line)
            api.functions.setdefault((namespace, fname), set()).add((ret, params))
    return api


def parse_host_dump(text: str) -> Api:
    """Parse the lines printed by ``tmi_test_host --dump-api``."""
    api = Api()
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "FUNC":
            ns, decl = rest.split("|", 1)
            ret, name, params = parse_signature(decl)
            api.functions.setdefault((ns, name), set()).add((ret, params))
        elif kind in ("METHOD", "PROP", "CTOR"):
            owner, decl = rest.split("|", 1)
            owner = owner.split("::")[-1]
            if kind == "PROP":
                tokens = decl.split()
                api.properties[(owner, tokens[-1])] = normalise_type(" ".join(tokens[:-1]))
            elif kind == "CTOR":
                api.constructors.setdefault(owner, set()).add(parse_signature(decl)[2])
            else:
                ret, name, params = parse_signature(decl)
                api.methods.setdefault((owner, name), set()).add((ret, params))
        elif kind == "ENUM":
            enum, item = rest.split("|", 1)
            key, value = item.split("=")
            api.enums[(enum, key)] = int(value)
        elif kind == "FUNCDEF":
            ret, name, params = parse_signature(rest)
            api.funcdefs[name] = (ret, params)
    return api


def mismatches(registered: Api, declared: Api) -> list[str]:
    """Every registration of ``registered`` that ``declared`` does not declare identically."""
    out: list[str] = []
    for key, sigs in registered.functions.items():
        for sig in sigs - declared.functions.get(key, set()):
            out.append(f"function {'::'.join(k for k in key if k)} {sig}: declared {declared.functions.get(key)}")
    for key, sigs in registered.methods.items():
        for sig in sigs - declared.methods.get(key, set()):
            out.append(f"method {key[0]}.{key[1]} {sig}: declared {declared.methods.get(key)}")
    for key, typ in registered.properties.items():
        if declared.properties.get(key) != typ:
            out.append(f"property {key[0]}.{key[1]} {typ}: declared {declared.properties.get(key)}")
    for cls, ctors in registered.constructors.items():
        for params in ctors - declared.constructors.get(cls, set()):
            out.append(f"constructor {cls}{params}: declared {declared.constructors.get(cls)}")
    for key, value in registered.enums.items():
        if declared.enums.get(key) != value:
            out.append(f"enum value {key[0]}::{key[1]} = {value}: declared {declared.enums.get(key)}")
    for name, sig in registered.funcdefs.items():
        if declared.funcdefs.get(name) != sig:
            out.append(f"funcdef {name} {sig}: declared {declared.funcdefs.get(name)}")
    return out
