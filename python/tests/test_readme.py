"""Every example of README.md, without a GPU: each line of its fenced code blocks (```sh, ```python, ```cpp, ```c)
and the commands and Python calls it quotes inline is one test, named by its README line, so an example that
stops working fails here under its own name.

- Shell: `flashjit ...` lines (with `VAR=value` prefixes and `time`) run the built CLI ($FLASHJIT_CLI, which
  CTest sets) through bash in a scratch folder that holds a copy of configs/, with a cache of their own.
  Synopsis lines are expanded into concrete commands that use every alternative (`[...]` left out and given,
  `a|b` and `a | b` each, placeholders such as N, FILE or CONFIG given values, `./my_app` replaced by the
  CLI's commands over the runtime). `flashjit run` and `flashjit autotune` run on a machine that shows them no
  GPU (CUDA_VISIBLE_DEVICES is emptied, so a GPU machine behaves the same): run says so and compiles only
  (exit 0), autotune says it needs a GPU (exit 1); every other command must exit 0. A line no rule below
  knows, or a placeholder without a value, fails: nothing is skipped silently.
- Python: each statement is parsed; every `flashjit.NAME` must be in the package, and every call's arguments
  must bind to NAME's signature; statements that need no torch and no GPU (emit, cache_info, version,
  precompile of a config, select and select_decode for an arch) are executed.
- C++ and C: the blocks are compiled (-fsyntax-only) against include/ inside a function, with the variables
  they use declared; each compiler error fails the test of the README line it points at.
"""
import ast
import functools
import importlib
import inspect
import json
import io
import os
import re
import shlex
import shutil
import subprocess
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pytest

import flashjit

SOURCE_DIR = Path(__file__).resolve().parents[2]
README = SOURCE_DIR / "README.md"
README_TEXT = README.read_text(encoding="utf-8")
CLI = os.environ.get("FLASHJIT_CLI")
COMMAND_TIMEOUT_S = 300


# ---- README parsing ------------------------------------------------------------------------------------------

@dataclass
class Block:
    lang: str
    start: int   # README line number of the block's first content line
    lines: list  # content lines


def fenced_blocks(text):
    blocks, current = [], None
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^\s*```\s*(\S*)", line)
        if fence and current is None:
            current = Block(fence.group(1), number + 1, [])
        elif fence:
            blocks.append(current)
            current = None
        elif current is not None:
            current.lines.append(line)
    assert current is None, f"README.md: the block opened at line {current.start - 1} is never closed"
    return blocks


def inline_spans(text):
    """(line, text) of every `code span` outside the fenced blocks."""
    spans, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"^\s*```", line):
            fenced = not fenced
        elif not fenced:
            spans += [(number, m.group(1)) for m in re.finditer(r"`([^`]+)`", line)]
    return spans


BLOCKS = fenced_blocks(README_TEXT)
INLINE = inline_spans(README_TEXT)


@dataclass
class Case:
    id: str
    line: int
    text: str                    # the README line (or statement), comments dropped
    command: Optional[list] = None  # shell: the concrete command's words
    setup: list = field(default_factory=list)  # shell: commands (word lists), Filled or callables(workdir, env)
    check: Optional[Callable] = None  # shell: check(result, workdir), after the exit code's
    post: list = field(default_factory=list)  # shell: (command, check(result, workdir)) run afterwards
    skip: Optional[str] = None   # a reason not to run it (after the checks that can still be made)
    error: Optional[str] = None  # why the test cannot make a case of this line: the test fails with it
    source: Optional[str] = None  # python: the statements of the line
    lang: Optional[str] = None    # cpp or c


def case_id(line, text, expansion=None):
    name = f"README.md:{line} {text}"
    return name if expansion is None or expansion == text else f"{name} -> {expansion}"


# ---- shell lines -------------------------------------------------------------------------------------------

def shell_commands(block):
    """(line, command text) of a sh block: comments dropped, comment-only lines (continuations of the comment
    above) skipped, and lines joined while a `[` is open or the line ends with a backslash."""
    commands, pending, first = [], "", None
    for offset, raw in enumerate(block.lines):
        code = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not code.strip() and not pending:
            continue
        if not pending:
            first = block.start + offset
        pending = (pending + " " + code.strip().rstrip("\\")).strip()
        if pending.count("[") > pending.count("]") or code.endswith("\\"):
            continue
        commands.append((first, pending))
        pending = ""
    if pending:
        commands.append((first, pending))
    return commands


# The two setup scripts are not run: tools/run.sh installs packages and builds, tools/test.sh runs CTest, which
# runs this test (recursion) -- both take minutes. Their lines still fail if the script is missing or not bash.
SKIPPED_SCRIPTS = {
    "tools/run.sh": "sets up (apt-get), builds and compiles: too slow for a unit test",
    "tools/test.sh": "builds and runs CTest, which runs this test: recursive",
    "tools/wheel_check.sh": "builds the wheel and a venv: too slow for a unit test (.ci/run runs it)",
}

# Values of the synopses' placeholders, by (the option before it, placeholder). A list gives one value per
# expansion (expansion i takes value i mod len), in step with the alternatives (`bf16|fp16`) of that
# expansion: run's CONFIG matches the dtype of its options.
PLACEHOLDERS = {
    ("--seqlen-q", "N"): "256", ("--seqlen-k", "N"): "256", ("--heads-q", "H"): "8", ("--heads-kv", "H"): "2",
    ("--head-dim", "D"): "64", ("--window-left", "N"): "64", ("--window-right", "N"): "0",
    ("--chunk-size", "N"): "64", ("--iters", "N"): "2", ("--sms", "N"): "114", ("-j", "N"): "2",
    ("--timeout", "S"): "60", ("--sweep", "FILE"): "tiny_sweep.json", ("-o", "TABLE"): "tuned_table.json",
    ("--arch", "..."): "sm_80",
    (None, "CONFIG"): [["run_config.json"], ["algorithm=fa2", "dtype=fp16", "head_dim=64", "mask=causal"]],
}

# Files the commands name (my_config.json and other.json as written; the placeholders' values above).
WORKDIR_FILES = {
    "my_config.json": '{"algorithm": "fa2", "head_dim": 64, "mask": "causal"}\n',
    "other.json": '{"kernel": "combine", "head_dim": 64}\n',
    "run_config.json": '{"algorithm": "fa2", "dtype": "bf16", "head_dim": 64, "mask": "causal"}\n',
    # One small prefill problem and one decode problem (so that --sms matters), a one-tile candidate space
    # (so that --all-candidates stays quick).
    "tiny_sweep.json": """{"name": "tiny", "problems": [
  {"dtype": "fp16", "heads_q": 8, "heads_kv": 2, "head_dim": 64, "seqlen": 256, "mask": "causal"},
  {"kind": "decode", "batch": 1, "heads_q": 8, "heads_kv": 2, "head_dim": 64, "seqlen_k": 64}],
 "candidates": {"algorithm": ["fa2"], "warps": [4], "block_m": [64], "block_n": [64], "stages": [2]}}
""",
}


def synopsis_words(text):
    """Words of a command, with `[`, `]` and a lone `|` as words of their own."""
    words = []
    for word in shlex.split(text):
        head = []
        while word.startswith("[") and len(word) > 1:
            head.append("[")
            word = word[1:]
        tail = []
        while word.endswith("]") and len(word) > 1:
            tail.append("]")
            word = word[:-1]
        words += head + [word] + tail
    return words


def parse_synopsis(words):
    """A tree: ("seq", [items]) with items ("word", w), ("opt", seq) and ("alt", [seq, ...]). A lone `|`
    separates the items on its two sides (`ls | stat | clear`), a `|` inside a word its parts (`bf16|fp16`)."""
    def item(i):
        w = words[i]
        if w == "[":
            inner, i = sequence(i + 1)
            if i >= len(words):
                raise ValueError("unbalanced [")
            return ("opt", inner), i + 1
        if w in ("]", "|"):
            raise ValueError(f"unexpected {w}")
        if "|" in w:
            return ("alt", [("seq", [("word", part)]) for part in w.split("|")]), i + 1
        return ("word", w), i + 1

    def sequence(i):
        items = []
        while i < len(words) and words[i] != "]":
            node, i = item(i)
            if i < len(words) and words[i] == "|":
                branches = [("seq", [node])]
                while i < len(words) and words[i] == "|":
                    if i + 1 >= len(words):
                        raise ValueError("| at the end")
                    node, i = item(i + 1)
                    branches.append(("seq", [node]))
                node = ("alt", branches)
            items.append(node)
        return ("seq", items), i

    tree, i = sequence(0)
    if i < len(words):
        raise ValueError("unbalanced ]")
    return tree


def alternatives(tree):
    """The largest number of alternatives of one choice in the tree."""
    kind, body = tree
    if kind == "word":
        return 1
    if kind == "opt":
        return alternatives(body)
    if kind == "alt":
        return max(len(body), *(alternatives(b) for b in body))
    return max([1] + [alternatives(item) for item in body])


def realize(tree, index, optional):
    """Words of one expansion: optional groups given (optional=True) or left out; alternative index mod n."""
    kind, body = tree
    if kind == "word":
        return [body]
    if kind == "opt":
        return realize(body, index, optional) if optional else []
    if kind == "alt":
        return realize(body[index % len(body)], index, optional)
    return [w for item in body for w in realize(item, index, optional)]


def fill_placeholders(words, index):
    """Placeholders (N, FILE, CONFIG, ...: all-caps words, and `...`) replaced by their values."""
    out, option = [], None
    for w in words:
        if re.fullmatch(r"[A-Z][A-Z_]*", w) or w == "...":
            value = PLACEHOLDERS.get((option, w), PLACEHOLDERS.get((None, w)))
            if value is None:
                raise ValueError(f"no value for the placeholder {w!r} (after {option or 'no option'}): "
                                 "add one to PLACEHOLDERS")
            if isinstance(value, list):
                value = value[index % len(value)]
            out += value if isinstance(value, list) else [value]
        else:
            out.append(w)
            if w.startswith("-"):
                option = w
            elif not re.fullmatch(r"[\w.=/-]+", w):
                option = None
    return out


def expansions(text):
    """Concrete commands of a synopsis: everything optional left out, then everything optional given with
    alternative 0, 1, ... (so every alternative runs at least once); duplicates dropped."""
    tree = parse_synopsis(synopsis_words(text))
    results = []
    for optional, count in ((False, 1), (True, alternatives(tree))):
        for index in range(count):
            words = fill_placeholders(realize(tree, index, optional), index)
            if words not in results:
                results.append(words)
    return results


def split_command(words):
    """(environment assignments, timed, program words) of a command."""
    env, i = [], 0
    while i < len(words) and re.fullmatch(r"[A-Za-z_]\w*=.*", words[i]):
        env.append(words[i])
        i += 1
    timed = i < len(words) and words[i] == "time"
    return env, timed, words[i + timed:]


def subcommand(program):
    """The flashjit subcommand of `flashjit [global options] SUB ...`."""
    i = 1
    while i < len(program) and program[i].startswith("-"):
        i += 2 if program[i] == "--cache-dir" else 1
    return program[i] if i < len(program) else None


def output(result):
    return f"$ {result.args[-1]}\nexit code {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def expect_exit(result, program):
    """No GPU is visible to the commands: `run` compiles only and says so, `autotune` refuses; others exit 0."""
    sub = subcommand(program)
    if sub == "run" and "--json" in program:
        assert result.returncode == 0 and json_document(result).get("ran") is False, \
            "flashjit run --json without a GPU must compile, say \"ran\": false, and exit 0:\n" + output(result)
    elif sub == "run":
        assert result.returncode == 0 and re.search(r"^no GPU found: .*; compiled only$", result.stdout, re.M), \
            "flashjit run without a GPU must compile, say `no GPU found`, and exit 0:\n" + output(result)
    elif sub == "autotune":
        assert result.returncode == 1 and "no device: autotune needs a GPU" in result.stderr, \
            "flashjit autotune without a GPU must fail (exit 1) only for want of a GPU:\n" + output(result)
    else:
        assert result.returncode == 0, output(result)


def json_document(result):
    """stdout of a --json command: one JSON document (an object carries "ok")."""
    try:
        return json.loads(result.stdout)
    except ValueError as e:
        raise AssertionError(f"stdout is not one JSON document ({e}):\n" + output(result))


def json_ok(result, workdir):
    document = json_document(result)
    assert not isinstance(document, dict) or document.get("ok") is True, output(result)


def matches(pattern, stream="stdout", exit_code=None):
    def check(result, workdir):
        if exit_code is not None:
            assert result.returncode == exit_code, f"expected exit code {exit_code}:\n" + output(result)
        assert re.search(pattern, getattr(result, stream), re.M), f"expected /{pattern}/ in {stream}:\n" + output(result)
    return check


def table_untouched(result, workdir):
    shipped = (SOURCE_DIR / "configs/tuned/h200.json").read_bytes()
    assert (workdir / "configs/tuned/h200.json").read_bytes() == shipped, "autotune changed the table it failed on"
    assert not (workdir / "configs/tuned/h200.json.partial").exists()
    assert not (workdir / "tuned_table.json").exists() and not (workdir / "tuned_table.json.partial").exists()


@dataclass(frozen=True)
class Filled:
    """A setup step: the cache as `command` leaves it on an empty cache. The command runs once per session (in
    a cache of its own, which later uses copy; a case that ran it as written on an empty cache leaves its own),
    so that several cases can start from a precompiled cache."""
    command: tuple


_filled_caches = {}


def fill_cache(step, workdir, env, scratch):
    if step.command not in _filled_caches:
        cache = scratch / f"filled-{len(_filled_caches)}"
        result = run_shell(list(step.command), workdir, {**env, "FLASHJIT_CACHE_DIR": str(cache)})
        assert result.returncode == 0, "setup failed:\n" + output(result)
        _filled_caches[step.command] = cache
    shutil.copytree(_filled_caches[step.command], env["FLASHJIT_CACHE_DIR"], dirs_exist_ok=True)


def copy_table_into_cache(workdir, env):
    tuned = Path(env["FLASHJIT_CACHE_DIR"]) / "tuned"
    tuned.mkdir(parents=True, exist_ok=True)
    shutil.copy(workdir / "configs/tuned/h200.json", tuned)


def extra_checks(program, env_words):
    """Assertions beyond the exit code, for what a line's comment promises."""
    sub, args = subcommand(program), program[2:]
    if "--json" in args and sub in ("info", "cache", "precompile", "select"):
        return json_ok
    if sub == "select":
        return matches(r"^(kernel|split kernel):\s+\w+_")
    if sub == "emit":
        return matches(r"\.entry\s" if "--ptx" in args else r'extern "C"')
    if sub == "compile" and "--json" in args:
        return matches(r'^\[\s*$')
    if sub == "compile":
        return matches(r"\b(miss|hit)\b")
    if sub == "info":
        if any(w.startswith("FLASHJIT_TUNED=") for w in env_words):
            return matches(r"^tuned:\s+1 table, [1-9]\d* entries")
        return matches(r"^flashjit:\s+\d+\.\d+\.\d+")
    if sub == "cache" and args[:1] == ["verify"]:
        return matches(r"^1 entries ok, 0 corrupt")
    if sub == "cache" and args[:1] == ["ls"]:
        return matches(r"fa2_bf16_d64_")
    if sub == "precompile":
        return matches(r"^\s+failed\s+0$")
    return None


# What `./my_app` stands for: the CLI's commands over the runtime (run: the dispatcher's kernel for the default
# llama3-shaped problem, and a causal one of the sweep; info: the tuned tables loaded).
MY_APP = {
    "FLASHJIT_JIT": [["flashjit", "run"], ["flashjit", "run", "--mask", "causal", "--seqlen-q", "1024",
                                           "--seqlen-k", "1024"]],
    "FLASHJIT_TUNED": [["flashjit", "info"], ["flashjit", "run"]],
}


def shell_cases(line, text, previous):
    """Cases of one command line of a sh block (or an inline span); previous: the commands above it in its block."""
    words = synopsis_words(text)
    env, timed, program = split_command(words)
    if program[:1] == ["bash"] and len(program) >= 2 and program[1] in SKIPPED_SCRIPTS:
        return [Case(case_id(line, text), line, text, command=program[1:2], skip=SKIPPED_SCRIPTS[program[1]])]
    if program[:1] == ["./my_app"] and len(program) == 1 and len(env) == 1:
        variable = env[0].split("=", 1)[0]
        if variable not in MY_APP:
            return [Case(case_id(line, text), line, text, error=f"no stand-in for ./my_app with {variable}")]
        cases = []
        for app in MY_APP[variable]:
            command = env + app
            setup, post = [], []
            if variable == "FLASHJIT_JIT":
                # "then runs from the cache alone": the precompile line above fills the cache first, and the
                # same command on an empty cache must fail (the cache is what it runs from).
                precompiles = [synopsis_words(t) for _, t in previous if synopsis_words(t)[:2] == ["flashjit", "precompile"]]
                if not precompiles:
                    return [Case(case_id(line, text), line, text, error="no `flashjit precompile` line above it")]
                setup = [Filled(tuple(split_command(precompiles[-1])[2]))]
                post = [(["FLASHJIT_CACHE_DIR=empty_cache"] + command,
                         matches(r"FLASHJIT_JIT=0 forbids compiling", "stderr", exit_code=1))]
            cases.append(Case(case_id(line, text, shlex.join(command)), line, text, command=command, setup=setup,
                              check=extra_checks(app, env), post=post))
        if variable == "FLASHJIT_TUNED":
            # The comment's alternative: "or copy the table into <cache dir>/tuned/".
            command = ["flashjit", "info"]
            cases.append(Case(case_id(line, text, "cp TABLE <cache dir>/tuned/ && flashjit info"), line, text,
                              command=command, setup=[copy_table_into_cache],
                              check=matches(r"^tuned:\s+1 table, [1-9]\d* entries")))
        return cases
    if program[:1] != ["flashjit"]:
        return [Case(case_id(line, text), line, text,
                     error="no rule for this README line: teach python/tests/test_readme.py to run or check it")]
    try:
        concrete = expansions(text)
    except ValueError as e:
        return [Case(case_id(line, text), line, text, error=f"cannot expand this line: {e}")]
    cases = []
    for command in concrete:
        env_words, _, prog = split_command(command)
        sub = subcommand(prog)
        setup, check, post = [], extra_checks(prog, env_words), []
        if sub == "cache":
            # Something in the cache to list, verify and clear.
            setup = [["flashjit", "compile", "algorithm=fa2", "head_dim=64", "mask=causal"]]
            if prog[2:3] == ["clear"]:
                post = [(["flashjit", "cache", "stat"], matches(r"^entries:\s+0$"))]
        if sub == "autotune":
            check = table_untouched
        cases.append(Case(case_id(line, text, shlex.join(command)), line, text, command=command, setup=setup,
                          check=check, post=post))
    if timed:
        # The README times a fresh cache, then "the second run ... (all cached)".
        command = concrete[0]
        cases.append(Case(case_id(line, text, "second run"), line, text, command=command,
                          setup=[Filled(tuple(split_command(command)[2]))],
                          check=matches(r"^\s+compiled\s+0$")))
    return cases


def collect_shell_cases():
    cases = []
    for block in BLOCKS:
        if block.lang != "sh":
            continue
        commands = shell_commands(block)
        for i, (line, text) in enumerate(commands):
            cases += shell_cases(line, text, commands[:i])
    # Commands quoted inline in the prose: `flashjit ...` and `time flashjit ...`.
    for line, text in INLINE:
        if re.match(r"(time )?flashjit ", text):
            cases += shell_cases(line, text, [])
    return cases


SHELL_CASES = collect_shell_cases()
FILLED = {step.command for case in SHELL_CASES for step in case.setup if isinstance(step, Filled)}


@pytest.fixture(scope="module")
def cli_bin(tmp_path_factory):
    """A folder whose `flashjit` is $FLASHJIT_CLI, first on the commands' PATH."""
    if not CLI:
        pytest.skip("FLASHJIT_CLI is not set (CTest sets it to the built CLI): the README's shell lines need it")
    assert Path(CLI).is_file(), f"FLASHJIT_CLI={CLI} is not a file"
    folder = tmp_path_factory.mktemp("bin")
    (folder / "flashjit").symlink_to(Path(CLI).resolve())
    return folder


def run_shell(words, workdir, env):
    return subprocess.run(["bash", "-c", shlex.join(words)], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S)


@pytest.mark.parametrize("case", SHELL_CASES, ids=[c.id for c in SHELL_CASES])
def test_readme_shell_line(case, request, tmp_path, tmp_path_factory):
    if case.error:
        pytest.fail(f"README.md:{case.line}: {case.text}: {case.error}")
    if case.skip:
        script = SOURCE_DIR / case.command[0]
        assert script.is_file(), f"README.md:{case.line} names {case.command[0]}, which does not exist"
        syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert syntax.returncode == 0, f"bash -n {script}:\n{syntax.stderr}"
        pytest.skip(f"{case.command[0]} is not run: {case.skip}")
    bin_dir = request.getfixturevalue("cli_bin")
    workdir = tmp_path / "work"
    shutil.copytree(SOURCE_DIR / "configs", workdir / "configs")
    for name, text in WORKDIR_FILES.items():
        (workdir / name).write_text(text)
    # The inherited FLASHJIT_* settings would change what the commands do; no GPU is shown to them.
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASHJIT_")}
    env.update(FLASHJIT_CACHE_DIR=str(tmp_path / "cache"), CUDA_VISIBLE_DEVICES="",
               PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    for step in case.setup:
        if isinstance(step, Filled):
            fill_cache(step, workdir, env, tmp_path_factory.getbasetemp())
            continue
        if callable(step):
            step(workdir, env)
            continue
        result = run_shell(step, workdir, env)
        assert result.returncode == 0, "setup failed:\n" + output(result)
    result = run_shell(case.command, workdir, env)
    env_words, _, program = split_command(case.command)
    if tuple(program) in FILLED.difference(_filled_caches) and not case.setup and not env_words and \
            result.returncode == 0:
        filled = tmp_path_factory.getbasetemp() / f"filled-{len(_filled_caches)}"
        shutil.copytree(env["FLASHJIT_CACHE_DIR"], filled)
        _filled_caches[tuple(program)] = filled
    expect_exit(result, program)
    if case.check:
        case.check(result, workdir)
    for command, check in case.post:
        check(run_shell(command, workdir, env), workdir)


# ---- Python ------------------------------------------------------------------------------------------------

NO_GPU_CALLS = {"emit", "cache_info", "version"}  # and precompile(config): see runs_without_gpu


def strip_comment(source):
    """A line of Python without its comment."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                return source[:token.start[1]].rstrip()
    except (tokenize.TokenError, IndentationError):
        pass
    return source.rstrip()


def python_cases():
    cases = []
    for block in BLOCKS:
        if block.lang != "python":
            continue
        source = "\n".join(block.lines)
        try:
            statements = ast.parse(source).body
        except SyntaxError as e:
            line = block.start + (e.lineno or 1) - 1
            cases.append(Case(case_id(line, block.lines[(e.lineno or 1) - 1].strip()), line, "",
                              error=f"not valid Python: {e.msg}"))
            continue
        by_line = {}
        for statement in statements:
            by_line.setdefault(statement.lineno, []).append(statement)
        for lineno, group in by_line.items():
            lines = block.lines[lineno - 1:group[-1].end_lineno]
            text = " ".join(strip_comment(l).strip() for l in lines)
            cases.append(Case(case_id(block.start + lineno - 1, text), block.start + lineno - 1, text,
                              source="\n".join(ast.get_source_segment(source, s) for s in group)))
    # Calls and names quoted in the prose: `flashjit.NAME(...)`, `flashjit.NAME`.
    for line, text in INLINE:
        if re.fullmatch(r"flashjit\.[A-Za-z_]\w*(\(.*\))?", text) and not re.search(r"\.(h|hpp|so)$", text):
            try:
                ast.parse(text)
            except SyntaxError as e:
                cases.append(Case(case_id(line, text), line, text, error=f"not valid Python: {e.msg}"))
                continue
            cases.append(Case(case_id(line, text), line, text, source=text))
    return cases


PYTHON_CASES = python_cases()


def flashjit_call_name(node):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            isinstance(node.func.value, ast.Name) and node.func.value.id == "flashjit":
        return node.func.attr
    return None


def runs_without_gpu(statement):
    """Imports, and statements that use no name but flashjit and call only what needs no GPU and no torch."""
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return True
    names = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)}
    calls = [n for n in ast.walk(statement) if isinstance(n, ast.Call)]
    if names != {"flashjit"} or not calls:
        return False
    for call in calls:
        name = flashjit_call_name(call)
        if name in NO_GPU_CALLS:
            continue
        # precompile(config) compiles into the disk cache; precompile(q_shape=...) loads on a GPU.
        if name == "precompile" and len(call.args) == 1 and not call.keywords:
            continue
        # select(..., arch=...) answers for a target GPU; without arch it asks the current device.
        if name in ("select", "select_decode") and any(k.arg == "arch" for k in call.keywords):
            continue
        return False
    return True


def execute(statement):
    if isinstance(statement, ast.Import):
        # Only flashjit is imported: torch is the caller's (flashjit imports it in the functions that take
        # tensors), and importing it here could change the NVRTC this process loads for the other tests.
        for alias in statement.names:
            if alias.name == "flashjit" or alias.name.startswith("flashjit."):
                importlib.import_module(alias.name)
        return
    code = compile(ast.Module(body=[statement], type_ignores=[]), "README.md", "exec")
    exec(code, {"flashjit": flashjit})


@pytest.mark.parametrize("case", PYTHON_CASES, ids=[c.id for c in PYTHON_CASES])
def test_readme_python_line(case):
    if case.error:
        pytest.fail(f"README.md:{case.line}: {case.text}: {case.error}")
    statements = ast.parse(case.source).body
    failures, checked = [], 0
    for node in (n for s in statements for n in ast.walk(s)):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "flashjit"):
            continue
        checked += 1
        if not hasattr(flashjit, node.attr) or node.attr not in flashjit.__all__:
            failures.append(f"flashjit.{node.attr}: not in the package's public names ({', '.join(flashjit.__all__)})")
    for call in (n for s in statements for n in ast.walk(s)):
        name = flashjit_call_name(call)
        if name is None or not hasattr(flashjit, name):
            continue
        signature = inspect.signature(getattr(flashjit, name))
        starred = any(isinstance(a, ast.Starred) for a in call.args)
        args = [] if starred else [object()] * len(call.args)
        kwargs = {k.arg: object() for k in call.keywords if k.arg is not None}  # **kwargs: nothing to bind
        try:
            signature.bind_partial(*args, **kwargs)
        except TypeError as e:
            failures.append(f"{ast.unparse(call)}: does not bind to flashjit.{name}{signature}: {e}")
    ran = 0
    for statement in statements:
        if failures or not runs_without_gpu(statement):
            continue
        try:
            execute(statement)
            ran += 1
        except Exception as e:  # every statement of the line runs; the failures are reported together
            failures.append(f"{ast.get_source_segment(case.source, statement)} raised {type(e).__name__}: {e}")
    assert not failures, f"README.md:{case.line}: {case.text}\n  " + "\n  ".join(failures)
    if not checked and not ran:
        pytest.skip("no flashjit call to check, and it needs torch on a GPU: parsed only")


# ---- C++ and C ---------------------------------------------------------------------------------------------

# The variables the snippets use and do not declare (file scope, so that a snippet may declare its own).
CPP_DECLARATIONS = """\
extern void *q, *k, *v, *o;            // device pointers
extern void *k_cache, *v_cache, *k_new, *v_new;
extern float* lse;
extern CUstream stream;
extern const int *cu_q, *cu_k, *lens, *indptr, *last;  // device int32
extern int B, max_len_q, max_len_k, total_q, total_k, capacity;
"""
C_DECLARATIONS = """\
extern flashjit_runtime* rt;
extern const int *d_cu_q, *d_cu_k; /* device int32 */
extern const float *d_slopes, *d_sinks; /* device float32 */
extern int B, max_len_q, max_len_k, total_q, total_k;
"""

LANGUAGES = {
    # lang: (compiler variables, fallbacks, flags, prelude, declarations)
    "cpp": (("FLASHJIT_CXX", "CXX"), ("c++", "g++", "clang++"), ["-x", "c++", "-std=c++20"],
            "#include <cstdio>\n#include <cuda.h>\n", CPP_DECLARATIONS),
    "c": (("FLASHJIT_CC", "CC"), ("cc", "gcc", "clang"), ["-x", "c", "-std=c99", "-pedantic-errors"],
          "#include <stdio.h>\n#include <flashjit/flashjit.h>\n", C_DECLARATIONS),
}


def compiler(lang):
    variables, fallbacks = LANGUAGES[lang][:2]
    for variable in variables:
        if os.environ.get(variable):
            return os.environ[variable]
    return next((shutil.which(c) for c in fallbacks if shutil.which(c)), None)


def cuda_include_dirs():
    if os.environ.get("FLASHJIT_CUDA_INCLUDE"):
        return os.environ["FLASHJIT_CUDA_INCLUDE"].split(os.pathsep)
    return [str(Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include")]


def translation_unit(lang):
    """Every block of the language, in README order, as one function body (a later block goes on with the
    variables of an earlier one); #include lines go to the top. #line keeps the README's line numbers."""
    prelude, declarations = LANGUAGES[lang][3:]
    top, body = [prelude], []
    for block in (b for b in BLOCKS if b.lang == lang):
        body.append(f'#line {block.start} "README.md"')
        for offset, line in enumerate(block.lines):
            if line.lstrip().startswith("#"):
                top += [f'#line {block.start + offset} "README.md"', line]
                body.append("")
            else:
                body.append(line)
    return "\n".join(top + ['#line 1 "readme_declarations"', declarations, "void readme_snippets(void) {"] +
                     body + ["}", ""])


@functools.lru_cache(maxsize=None)
def compiled(lang):
    """(compiler output, {README line: [error messages]}, errors not on a README line)."""
    cc = compiler(lang)
    if cc is None:
        pytest.skip(f"no {lang} compiler: set {LANGUAGES[lang][0][0]}")
    flags = LANGUAGES[lang][2]
    includes = [f"-I{SOURCE_DIR / 'include'}"] + [f"-I{d}" for d in cuda_include_dirs()]
    result = subprocess.run([*cc.split(), *flags, "-fsyntax-only", "-Wall", "-fno-diagnostics-color", *includes,
                             "-"], input=translation_unit(lang), capture_output=True, text=True, timeout=120)
    errors, elsewhere, context = {}, [], None
    for line in result.stderr.splitlines():
        located = re.match(r"^README\.md:(\d+):(?:\d+:)? (?:fatal )?error: (.*)", line)
        # An error inside a header names the README line it comes from before it: an #include, or the use
        # that instantiated a template ("required from here").
        origin = re.match(r"^(?:In file included from|\s+from) README\.md:(\d+)", line) or \
            re.match(r"^README\.md:(\d+):(?:\d+:)?\s+required from", line)
        if located:
            errors.setdefault(int(located.group(1)), []).append(located.group(2))
        elif origin:
            context = int(origin.group(1))
        elif re.search(r"\b(fatal )?error\b:", line):
            if context is None:
                elsewhere.append(line)
            else:
                errors.setdefault(context, []).append(line)
        elif not line.startswith(" ") and not re.match(r"^\S+: In ", line):
            context = None
    if result.returncode != 0 and not errors and not elsewhere:
        elsewhere.append(f"the compiler exited {result.returncode}")
    return result.stderr, errors, elsewhere


def code_of(line, lang):
    return re.sub(r"//.*$" if lang == "cpp" else r"/\*.*?\*/", "", line).strip()


C_CASES = [Case(case_id(block.start + offset, code_of(line, block.lang)), block.start + offset,
                code_of(line, block.lang), lang=block.lang)
           for block in BLOCKS if block.lang in LANGUAGES
           for offset, line in enumerate(block.lines) if code_of(line, block.lang)]


@pytest.mark.parametrize("case", C_CASES, ids=[c.id for c in C_CASES])
def test_readme_c_line(case):
    lang = case.lang
    log, errors, elsewhere = compiled(lang)
    assert not errors.get(case.line), f"README.md:{case.line} ({lang}): " + "; ".join(errors[case.line]) + "\n" + log
    assert not elsewhere, f"the {lang} snippets do not compile (no README line to blame):\n{log}"


# ---- coverage ----------------------------------------------------------------------------------------------

def test_every_readme_block_is_exercised():
    known = {"sh", "python"} | set(LANGUAGES)
    covered = {c.line for c in SHELL_CASES + PYTHON_CASES + C_CASES}
    for block in BLOCKS:
        assert block.lang in known, f"README.md:{block.start - 1}: a ```{block.lang} block, which this test " \
                                    "cannot exercise: teach python/tests/test_readme.py (or change the fence)"
        lines = range(block.start, block.start + len(block.lines))
        assert covered & set(lines), f"README.md:{block.start - 1}: no test exercises this ```{block.lang} block"
