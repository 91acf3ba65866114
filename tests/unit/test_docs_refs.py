"""What README.md and docs/*.md name exists as they name it: the paths, `make` targets, `python -m`
modules, the options given to this project's CLIs, the variables the code reads, the sections one
doc points to in another, and the registered models and kits (handlers/registry.py). And the docs
tell the present: no issue numbers or session words.

Everything is read statically (no CLI is started, no model imported): a CLI's options are the option
strings of the `add_argument` calls in its module and the project modules it imports (all of tools/
where it reads the models' tool parts through tools/registry.py)."""

from __future__ import annotations

import ast
import functools
import importlib.util
import itertools
import os
import re
import shlex
from pathlib import Path

import pytest

from handlers.registry import MODELS, names
from tests.support.docblocks import DOCS, ROOT, RUN, parse, rel

GENERATED = {
    "artifacts",
    "model_store",
    "build",
    "reports",
    "logs",
    "mlruns",
    ".venv",
    ".venv-oip",
    "scored",
    "clients/_generated",
}
"""Folders `make` and the tools write: named by the docs, absent from a clean checkout."""

CODE_SUFFIXES = {".py", ".sh", ".yaml", ".yml", ".cfg", ".properties", ".toml", ".txt", ".json"}
CODE_FILES = {"Makefile", "run", "Dockerfile.cpu", "Dockerfile.gpu"}

EXTERNAL_ENV = {
    # read by libraries or tools, not by this project's code
    "AWS_ENDPOINT_URL": "boto3's endpoint variable",
    "AWS_ACCESS_KEY_ID": "the AWS credential chain",
    "AWS_SECRET_ACCESS_KEY": "the AWS credential chain",
    "AWS_PROFILE": "the AWS credential chain",
    "MLFLOW_TRACKING_URI": "MLflow's client",
    "OMP_NUM_THREADS": "OpenMP",
    "CUDA_VISIBLE_DEVICES": "CUDA",
    "PYTHONPATH": "Python",
    "VIRTUAL_ENV": "venv's activate",
    "LD_PRELOAD": "the dynamic loader",
}

NOT_VARIABLES = {
    # upper-case words with an underscore that name no variable
    "RST_STREAM": "an HTTP/2 frame type",
}

EXTERNAL_FLAGS = {
    # options of other programs the docs name on their own (a command's options are checked
    # against that command)
    "--ts-config": "torchserve",
    "--model-store": "torchserve",
    "--models": "torchserve",
    "--ncs": "torchserve",
    "--disable-token-auth": "torchserve",
    "--fail-with-body": "curl",
    "--env-manager": "mlflow models serve",
    "--backend-store-uri": "mlflow ui",
    "--isolation": "buildah",
    "--layers": "buildah build, podman build",
    "--network": "buildah run",
    "--user": "buildah run",
    "--headless": "locust",
    "--users": "locust",
    "--spawn-rate": "locust",
    "--run-time": "locust",
    "--no-cache": "lint-imports",
    "--check": "ruff format",
    "--dry-run": "kubectl",
    "--cov": "pytest-cov",
}

SESSION_WORDS = re.compile(
    r"#\d+\b|\bissues? \d+|\bgoals? \d+\b|\bthis session\b|\bthe session\b|\blast session\b"
    r"|\bprevious session\b|\bearlier session\b|\bthis round\b|\blast round\b|\bprevious round\b"
    r"|\bearlier round\b|\bnext round\b",
    re.IGNORECASE,
)

# --- reading the docs -------------------------------------------------------------------------


def _prose(doc: Path) -> str:
    """The doc's text with its fenced blocks blanked (line numbers kept)."""
    text = doc.read_text()
    for _, region in reversed(parse(doc).regions):
        chunk = text[region.start : region.end]
        text = text[: region.start] + re.sub(r"[^\n]", " ", chunk) + text[region.end :]
    return text


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


@functools.cache
def code_texts(doc: Path) -> list[tuple[int, str]]:
    """(line, text) of every run-language fenced block and every inline code span."""
    found = []
    for _, region in parse(doc).regions:
        block = region.parsed
        if block.language in RUN:
            found.append((block.line + 1, block.source))
    prose = _prose(doc)
    for m in re.finditer(r"(`+)((?:(?!\n\s*\n).)+?)\1", prose, re.DOTALL):
        found.append((_line(prose, m.start()), m.group(2)))
    return found


def _commands(text: str) -> list[str]:
    """Shell commands in a block or span: continuation lines joined, comments dropped, split on
    ; && || |."""
    text = re.sub(r"\\\n", " ", text)
    out: list[str] = []
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line)
        out.extend(c.strip() for c in re.split(r"&&|\|\||[;|]", line) if c.strip())
    return out


# --- reading the repository -------------------------------------------------------------------


@functools.cache
def make_targets() -> set[str]:
    targets: set[str] = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith(("\t", "#", " ")):
            continue
        m = re.match(r"^([^:=#]+?)\s*::?(?!=)", line)
        if m:
            targets.update(m.group(1).split())
        if line.startswith(".PHONY:"):
            targets.update(line.split(":", 1)[1].split())
    return targets


def _project_files(left_out: set[str]) -> list[Path]:
    """The checkout's own files: the folders `make` writes (a clean clone's .venv among them),
    hidden ones but .ci, generated code and caches are never walked."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(ROOT):
        here = Path(folder)
        if here == ROOT:
            dirs[:] = [
                d
                for d in dirs
                if d not in GENERATED
                and d not in left_out
                and (d == ".ci" or not d.startswith("."))
            ]
        dirs[:] = [d for d in dirs if d not in {"_generated", "__pycache__"}]
        found.extend(here / f for f in files)
    return found


@functools.cache
def code_corpus() -> str:
    """The text of every code, config and script file (docs left out)."""
    parts = []
    for path in _project_files({"docs", "tests"}):
        if path.suffix in CODE_SUFFIXES or path.name in CODE_FILES:
            try:
                parts.append(path.read_text())
            except UnicodeDecodeError:
                continue
    return "\n".join(parts)


def _module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__main__.py"):
        if candidate.is_file():
            return candidate
    return None


def _project_top(name: str) -> bool:
    return (ROOT / name / "__init__.py").is_file() or (ROOT / f"{name}.py").is_file()


@functools.cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _imports(path: Path) -> set[Path]:
    """The project modules a module imports (its package's __init__ files included)."""
    found = set()
    for node in ast.walk(_parsed(path)):
        names_: list[str] = []
        if isinstance(node, ast.Import):
            names_ = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names_ = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names_:
            if not _project_top(name.split(".")[0]):
                continue
            base = ROOT.joinpath(*name.split("."))
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    found.add(candidate)
    return found


def _option_strings(arg: ast.expr) -> list[str]:
    """A constant option string, or an f-string one made per model (`f"--{name}-streams"`): one
    per registered model."""
    if isinstance(arg, ast.Constant):
        return [str(arg.value)]
    if isinstance(arg, ast.JoinedStr) and len(arg.values) > 1:
        return [
            "".join(str(v.value) if isinstance(v, ast.Constant) else model for v in arg.values)
            for model in names()
        ]
    return []


def _options(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(_parsed(path)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            negated = any(
                k.arg == "action" and ast.unparse(k.value).endswith("BooleanOptionalAction")
                for k in node.keywords
            )
            for arg in node.args:
                for option in _option_strings(arg):
                    if option.startswith("--"):
                        found.add(option)
                        if negated:
                            found.add("--no-" + option[2:])
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("ArgumentParser")
            and not any(
                k.arg == "add_help" and isinstance(k.value, ast.Constant) and not k.value.value
                for k in node.keywords
            )
        ):
            found.add("--help")
    return found


@functools.cache
def cli_options(module: str) -> frozenset[str]:
    """Every option string the CLI `python -m module` can accept."""
    start = _module_file(module)
    assert start is not None, module
    seen: set[Path] = set()
    todo = [start]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo.extend(_imports(path) - seen)
    if ROOT / "tools" / "registry.py" in seen:
        seen.update((ROOT / "tools").rglob("*.py"))
    return frozenset(itertools.chain.from_iterable(_options(p) for p in seen))


@functools.cache
def all_options() -> frozenset[str]:
    found: set[str] = set()
    for path in _project_files({"tests"}):
        if path.suffix == ".py":
            found |= _options(path)
    return frozenset(found)


MAKE_ARGS = {
    "BENCH_ARGS": "bench",
    "SCORE_ARGS": "scoring",
    "BENCH_SCORE_ARGS": "scoring.bench",
    "REHEARSE_ARGS": "rehearsal",
    "LOADTEST_ARGS": "loadtests.locustfile",
}
"""Makefile variables whose options go to one of this project's CLIs."""

# --- the checks -------------------------------------------------------------------------------

PATH_TOKEN = re.compile(r"(?<![\w./:@-])((?:\.?[\w-]+/)+[\w.<>*{},-]*)")


def _expand(path: str) -> list[str]:
    """{a,b} alternatives expanded; <placeholders> become globs."""
    m = re.search(r"\{([^{}]*)\}", path)
    if m:
        return [
            p
            for alt in m.group(1).split(",")
            for p in _expand(path[: m.start()] + alt + path[m.end() :])
        ]
    return [re.sub(r"<[^>]*>", "*", path)]


KUBECTL_RESOURCE = re.compile(
    r"(?<![\w/])(?:deploy|deployment|svc|service|pod|po|sts|statefulset|ds|daemonset|cm|configmap"
    r"|secret|job|rs|replicaset)/[\w.-]+"
)
"""`kubectl ... deploy/torchserve`: a resource of the cluster, not a path."""

PLACEHOLDER_MODEL = {"docs/adding-a-model.md": "m"}
"""Docs where a model's name is written as a placeholder (`handlers/m/`, `training.m`,
`--no-m-streams`): a name holding it must exist for at least one registered model."""


def _placeholder(doc: Path) -> str | None:
    return PLACEHOLDER_MODEL.get(rel(doc))


def _instances(doc: Path, name: str, sep: str = "/") -> list[str]:
    """`name` with the doc's model placeholder (a whole path segment, `m_handler`, `-m-`) replaced
    by each registered model; [name] where the doc has none or the name does not use it."""
    m = _placeholder(doc)
    if m is None:
        return [name]
    pattern = re.compile(rf"(?<![\w]){m}(?=[{re.escape(sep)}_-]|$)")
    if not pattern.search(name):
        return [name]
    return [pattern.sub(model, name) for model in names()]


def _symbol_defined(path: Path, dotted: str) -> bool:
    """`dotted` (`Name` or `Class.attr`) is bound at the top of the module `path` (a def, class,
    assignment or import), the rest inside that class's body."""
    body = _parsed(path).body
    for part in dotted.split("."):
        found: ast.stmt | None = None
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name == part:
                    found = node
            elif isinstance(node, ast.Assign):
                if any(isinstance(t, ast.Name) and t.id == part for t in node.targets):
                    found = node
            elif isinstance(node, ast.AnnAssign):
                if isinstance(node.target, ast.Name) and node.target.id == part:
                    found = node
            elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.split(".")[0]) == part for a in node.names
            ):
                found = node
        if found is None:
            return False
        body = found.body if isinstance(found, ast.ClassDef) else []
    return True


FILE_SUFFIXES = {
    "py", "json", "yaml", "yml", "md", "txt", "csv", "sh", "toml", "cfg", "ini", "png", "jpg",
    "html", "mar", "onnx", "pt", "npz", "log", "properties", "lock", "proto", "f32", "tar", "gz",
}  # fmt: skip


def _exists(token: str) -> bool:
    """A path (a glob where it has one), or `path/module.Symbol`: module.py defines Symbol."""
    expanded = _expand(token)
    if all(any(ROOT.glob(p)) if "*" in p else (ROOT / p).exists() for p in expanded):
        return True
    head, _, last = token.rpartition("/")
    stem, dot, symbol = last.partition(".")
    if not re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", symbol) or symbol in FILE_SUFFIXES:
        return False  # a file (`seeds.json`), not a module's name
    module = ROOT / head / f"{stem}.py"
    return module.is_file() and _symbol_defined(module, symbol)


def path_problems(doc: Path) -> list[str]:
    problems = []
    candidates = []
    for line, text in code_texts(doc):
        text = "\n".join(
            KUBECTL_RESOURCE.sub(" ", t) if re.search(r"\bkubectl\b", t) else t
            for t in text.splitlines()
        )
        for m in PATH_TOKEN.finditer(text):
            candidates.append((line, m.group(1)))
    prose = _prose(doc)
    for m in re.finditer(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", prose):
        if "://" not in m.group(1):
            target = (doc.parent / m.group(1)).resolve()
            if not target.exists():
                problems.append(f"{rel(doc)}:{_line(prose, m.start())}: link to {m.group(1)}")
    for m in re.finditer(r"(?<![\w/`])(docs/[\w-]+\.md)", prose):
        candidates.append((_line(prose, m.start()), m.group(1)))
    for line, token in candidates:
        token = token.rstrip(".,;:")
        parts = token.split("/")
        if parts[0] in GENERATED or "/".join(parts[:2]) in GENERATED:
            continue
        if parts[0] in {"", ".."} or not (ROOT / parts[0]).exists() or "..." in token:
            continue
        if not any(_exists(t) for t in _instances(doc, token)):
            problems.append(f"{rel(doc)}:{line}: no {token}")
    return problems


def section_problems(doc: Path) -> list[str]:
    """`docs/x.md ("Heading")` or `docs/x.md, "Heading"`: x.md has a heading reading so."""
    problems = []
    prose = _prose(doc)
    for m in re.finditer(r"(docs/[\w-]+\.md)`?\s*(?:\(|,)\s*\"([^\"]+)\"", prose):
        target, heading = ROOT / m.group(1), " ".join(m.group(2).split())
        if not target.exists():
            continue
        headings = [
            " ".join(h.split()).lower()
            for h in re.findall(r"^#+\s+(.*)$", _prose(target), re.MULTILINE)
        ]
        if not any(heading.lower() in h for h in headings):
            problems.append(
                f"{rel(doc)}:{_line(prose, m.start())}: {m.group(1)} has no section {heading!r}"
            )
    return problems


def make_problems(doc: Path) -> list[str]:
    problems = []
    for line, text in code_texts(doc):
        for command in _commands(text):
            m = re.match(r"^(?:[A-Z_]+=\S*\s+)*make\s+(.*)$", command)
            if not m:
                continue
            try:
                words = shlex.split(m.group(1))
            except ValueError:
                words = m.group(1).split()
            for word in words:
                if word.startswith("-") or "=" in word or not re.fullmatch(r"[a-z][\w-]*", word):
                    continue
                if word not in make_targets():
                    problems.append(f"{rel(doc)}:{line}: no make target {word!r}")
    return problems


def _flags(args: str) -> list[str]:
    return re.findall(r"(?<![\w-])(--[a-z][\w-]*)", args)


def cli_problems(doc: Path) -> list[str]:
    problems = []
    for line, text in code_texts(doc):
        commands = _commands(text)
        for command in commands:
            m = re.search(r"(?:^|\s)(?:\S*/)?python[\d.]*\s+-m\s+([\w.<>]+)(.*)$", command)
            if m:
                module, rest = m.group(1), m.group(2)
                top = module.split(".")[0]
                if _project_top(top):
                    # `training.<model>`, or the doc's placeholder: every registered model's
                    # (a placeholder's: at least one) module takes the options
                    modules = (
                        [module.replace("<model>", n) for n in names()]
                        if "<model>" in module
                        else _instances(doc, module, sep=".")
                    )
                    present = [mod for mod in modules if _module_file(mod) is not None]
                    if (
                        "<" in module.replace("<model>", "")
                        or not present
                        or ("<model>" in module and len(present) != len(modules))
                    ):
                        problems.append(f"{rel(doc)}:{line}: no module {module}")
                        continue
                    for flag in _flags(rest):
                        if not any(flag in cli_options(mod) for mod in present):
                            problems.append(f"{rel(doc)}:{line}: python -m {module} has no {flag}")
                elif importlib.util.find_spec(top) is None:
                    problems.append(f"{rel(doc)}:{line}: no module {module}")
            for var, module in MAKE_ARGS.items():
                for value in re.findall(rf"\b{var}=(\"[^\"]*\"|'[^']*'|\S+)", command):
                    for flag in _flags(value):
                        if flag not in cli_options(module):
                            problems.append(f"{rel(doc)}:{line}: {var} ({module}) has no {flag}")
        if len(commands) == 1 and re.fullmatch(r"--[a-z][\w-]*(?:[ =]\S+)*", commands[0]):
            flag = _flags(commands[0])[0]
            if (
                not any(f in all_options() for f in _instances(doc, flag, sep="-"))
                and flag not in EXTERNAL_FLAGS
            ):
                problems.append(f"{rel(doc)}:{line}: no CLI of this project takes {flag}")
    return problems


def env_problems(doc: Path) -> list[str]:
    problems = []
    corpus = code_corpus()
    for line, text in code_texts(doc):
        found = set(re.findall(r"(?<![\w$.-])([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b(?!\.)", text))
        found |= set(re.findall(r"(?:^|\s)([A-Z][A-Z0-9_]*)=", text))
        for var in sorted(found):
            if var in EXTERNAL_ENV or var in NOT_VARIABLES or re.search(rf"\b{var}\b", corpus):
                continue
            problems.append(f"{rel(doc)}:{line}: {var} is read by nothing in the code")
    return problems


def present_problems(doc: Path) -> list[str]:
    text = doc.read_text()
    return [
        f"{rel(doc)}:{_line(text, m.start())}: {m.group(0)!r}" for m in SESSION_WORDS.finditer(text)
    ]


CHECKS = {
    "paths": path_problems,
    "sections": section_problems,
    "make": make_problems,
    "cli": cli_problems,
    "env": env_problems,
    "present": present_problems,
}


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_docs_name_what_exists(doc, check):
    problems = CHECKS[check](doc)
    assert not problems, "\n".join(problems)


# --- the registry -----------------------------------------------------------------------------

README = ROOT / "README.md"


def _section(text: str, heading: str) -> tuple[int, int] | None:
    """The line range [first, last) of the `## heading` section (its ### subsections included)."""
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    if m is None:
        return None
    return _line(text, m.start()), _line(text, m.end())


def model_table_problems(doc: Path) -> list[str]:
    """The README's "## The models" table has one row per registered model, in the registry's
    order."""
    text = doc.read_text()
    m = re.search(r"^## The models\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL)
    if m is None:
        return [f"{rel(doc)}: no '## The models' section"]
    rows = re.findall(r"^\|\s*`([\w-]+)`\s*\|", m.group(1), re.MULTILINE)
    if rows != names():
        return [f"{rel(doc)}: the model table has {rows}, the registry {names()}"]
    return []


def model_call_problems(doc: Path) -> list[str]:
    """Every registered model has a call example (`curl .../predictions/<model>` or
    `python -m clients predict|stream|explain <model>`) in the README's "## Calling the server"."""
    span = _section(doc.read_text(), "Calling the server")
    if span is None:
        return [f"{rel(doc)}: no '## Calling the server' section"]
    called = set()
    for line, text in code_texts(doc):
        if not span[0] <= line < span[1]:
            continue
        for command in _commands(text):
            called.update(re.findall(r"/predictions/([\w-]+)", command))
            called.update(re.findall(r"\bclients\s+(?:predict|stream|explain)\s+([\w-]+)", command))
    return [
        f"{rel(doc)}: 'Calling the server' has no call example for {model}"
        for model in names()
        if model not in called
    ]


def model_list_problems(doc: Path) -> list[str]:
    """A command or phrase that lists models lists every registered one; no "both models"."""
    models = set(names())
    problems = []
    for line, text in code_texts(doc):
        for command in _commands(text):
            words = command.split()
            for run in (
                list(g) for k, g in itertools.groupby(words, key=lambda w: w in models) if k
            ):
                if len(run) >= 2 and set(run) != models:
                    problems.append(f"{rel(doc)}:{line}: lists {run}, not every model")
    text = doc.read_text()
    count = {2: "two", 3: "three", 4: "four", 5: "five"}
    wrong = [w for n, w in count.items() if n != len(models)]
    if len(models) != 2:
        wrong.append("both")
    pattern = rf"\b(?:{'|'.join(wrong)}) (?:registered |served |shipped )?models\b"
    for m in re.finditer(pattern, text, re.IGNORECASE):
        problems.append(
            f"{rel(doc)}:{_line(text, m.start())}: {m.group(0)!r} ({len(models)} are registered)"
        )
    return problems


def readme_registry_problems(doc: Path = README) -> list[str]:
    return model_table_problems(doc) + model_call_problems(doc) + model_list_problems(doc)


def test_readme_names_every_registered_model():
    """The model table, a call example per model and every command listing models (`make`'s
    `python -m deploy.wait_ready ...`) hold every model of handlers/registry.py."""
    problems = readme_registry_problems()
    assert not problems, "\n".join(problems)


def _readme_without(model: str, where: str) -> str:
    """The README's text with `model` left out of its table, its call examples, or its lists."""
    lines = README.read_text().splitlines(keepends=True)
    if where == "table":
        return "".join(line for line in lines if not line.startswith(f"| `{model}` |"))
    if where == "calls":
        call = re.compile(rf"/predictions/{model}\b|\bclients\s+\w+\s+{model}\b")
        return "".join(line for line in lines if not call.search(line))
    others = "|".join(n for n in names() if n != model)
    listing = re.compile(rf"((?:{others})\s+)?\b{model}\b(\s+(?:{others}))?")
    return "".join(
        listing.sub(lambda m: (m.group(1) or "") + (m.group(2) or "").lstrip(), line)
        if re.search(rf"\b(?:{others})\s+.*\b{model}\b|\b{model}\s+(?:{others})\b", line)
        else line
        for line in lines
    )


@pytest.mark.parametrize("where", ["table", "calls", "lists"])
@pytest.mark.parametrize("model", names())
def test_the_readme_check_catches_a_model_left_out(tmp_path, monkeypatch, model, where):
    monkeypatch.setattr("tests.unit.test_docs_refs.rel", lambda d: d.name)
    copy = tmp_path / "README.md"
    copy.write_text(_readme_without(model, where))
    assert copy.read_text() != README.read_text()
    problems = "\n".join(readme_registry_problems(copy))
    expected = {
        "table": "the model table has",
        "calls": f"no call example for {model}",
        "lists": "not every model",
    }[where]
    assert expected in problems, problems


def test_readme_names_every_kit():
    m = re.search(r"`handlers/kits/`:\s*([^)]*)\)", README.read_text())
    assert m, "README.md does not list the kits after `handlers/kits/`:"
    listed = [k.strip() for k in m.group(1).split(",")]
    kits = list(dict.fromkeys(k for spec in MODELS for k in spec.kits))
    assert sorted(listed) == sorted(kits), f"README lists kits {listed}, registry has {kits}"
    folders = sorted(
        p.name
        for p in (ROOT / "handlers" / "kits").iterdir()
        if p.is_dir() and (p / "__init__.py").exists()
    )
    assert folders == sorted(kits)


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_model_lists_are_whole(doc):
    problems = model_list_problems(doc)
    assert not problems, "\n".join(problems)


# --- the checks catch what they are for -------------------------------------------------------


def test_the_checks_catch_drift(tmp_path, monkeypatch):
    doc = tmp_path / "x.md"
    doc.write_text(
        "Run `make no-such-target` then `python -m deploy.gone`, `python -m bench --no-such-flag`\n"
        'and `make bench BENCH_ARGS="--models sentiment --nope"`; see `handlers/gone.py`,\n'
        '[this](missing.md), docs/performance.md ("No such heading") and `NO_SUCH_VARIABLE`.\n'
        "As in issue 12 (#12), this session. Both models train.\n"
        "```bash\npython -m deploy.wait_ready sentiment frequency\n```\n"
    )
    monkeypatch.setattr("tests.unit.test_docs_refs.rel", lambda d: d.name)
    assert "no make target 'no-such-target'" in "\n".join(make_problems(doc))
    cli = "\n".join(cli_problems(doc))
    assert "no module deploy.gone" in cli
    assert "python -m bench has no --no-such-flag" in cli
    assert "BENCH_ARGS (bench) has no --nope" in cli and "--models sentiment" not in cli
    paths = "\n".join(path_problems(doc))
    assert "no handlers/gone.py" in paths and "link to missing.md" in paths
    assert "has no section 'No such heading'" in "\n".join(section_problems(doc))
    assert "NO_SUCH_VARIABLE is read by nothing" in "\n".join(env_problems(doc))
    assert len(present_problems(doc)) == 3
    with pytest.raises(AssertionError, match="not every model"):
        test_model_lists_are_whole(doc)


def test_the_reading_is_exact(tmp_path, monkeypatch):
    """What the checks understand (a module's names, a doc's model placeholder, options made per
    model, kubectl's resources) still fails a name that is not there."""
    monkeypatch.setattr("tests.unit.test_docs_refs.rel", lambda d: d.name)
    doc = tmp_path / "x.md"
    doc.write_text(
        "`handlers/budget.Budget`, `handlers/budget.NoSuchBudget`, `handlers/errors.KINDS.nope`,\n"
        "`training/digits/seeds.json`, `handlers/m/model.py`, `--no-frequency-streams`,\n"
        "`--no-m-streams`, `python -m training.<model> --out x`, `python -m training.<model> --nope`.\n"
        "```bash\nkubectl rollout status deploy/torchserve\ncat deploy/torchserve\n```\n"
        '```bash\nmake loadtest LOADTEST_ARGS="--shape spike"\n```\n'
    )
    paths = path_problems(doc)
    assert sorted(paths) == sorted(
        [
            "x.md:1: no handlers/budget.NoSuchBudget",
            "x.md:1: no handlers/errors.KINDS.nope",
            "x.md:2: no training/digits/seeds.json",
            "x.md:2: no handlers/m/model.py",
            "x.md:5: no deploy/torchserve",
        ]
    ), paths
    cli = cli_problems(doc)
    assert cli == [
        "x.md:3: no CLI of this project takes --no-m-streams",
        "x.md:3: python -m training.<model> has no --nope",
    ], cli
    assert make_problems(doc) == []
    monkeypatch.setitem(PLACEHOLDER_MODEL, "x.md", "m")
    assert "x.md:2: no handlers/m/model.py" not in path_problems(doc)
    assert "--no-m-streams" not in "\n".join(cli_problems(doc))
