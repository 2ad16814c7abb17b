"""The documentation is held to what it shows: every shell command in README.md and in the site's
pages is run here, or names the test that runs it, or is marked as needing a GPU or a cluster; the
site builds without a warning (MkDocs strict: broken links, anchors and pages missing from the nav
fail it), every relative link in the built HTML resolves, and the site opens in a real browser with
its navigation in place.

The convention, in the Markdown: a shell block (```sh, ```bash, ```console, ```shell) is preceded by
one HTML comment, invisible on the page, saying how it is exercised:

    <!-- run -->                                       this module runs every line (cheap ones only)
    <!-- covered-by: tests/test_x.py::test_name ... --> that test runs it: it exists, and its file holds
                                                       each command's flags (and subcommand)
    <!-- needs: gpu -->  / <!-- needs: slurm -->       run where those tests run; with `covered-by:`
                                                       (`<!-- needs: slurm; covered-by: ... -->`) the
                                                       named tests are the ones; without, a GPU block is
                                                       run by this module on a host with a GPU

Every fenced block names its language, so a command cannot hide in an unmarked one.
"""

from __future__ import annotations

import ast
import functools
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from .conftest import ROOT
from .test_report import _browse

QUICK = pytest.mark.quick  # the quick tier (nox -s tests -- -m quick): all but the GPU commands

README = ROOT / "README.md"
DOCS = ROOT / "docs"
SHELL = ("sh", "bash", "console", "shell")
NEEDS = ("gpu", "slurm")
MAX_README_LINES = 250
# nox sessions that wrap a harness command: the word a covering test must hold
SESSION_COMMAND = {"matrix": "run", "build": "build", "repro": "repro", "bisect": "bisect", "report": "report",
                   "tests": "pytest", "lint": "ruff", "lock": "--as-of", "tests-latest": "tests-latest",
                   "docs": "mkdocs", "watch": "watch", "upgrade": "upgrade"}
_MARKER = re.compile(r"^<!--\s*(.*?)\s*-->$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int          # of the opening fence, 1-based
    lang: str
    text: str
    marker: dict       # {"run": ""} / {"covered-by": "..."} / {"needs": "gpu", "covered-by": "..."}

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    out, start, before = [], None, ""
    for i, line in enumerate(lines):
        if line.startswith("```"):
            if start is None:
                start, lang = i, line[3:].strip()
                marker = {}
                found = _MARKER.match(before.strip())
                if found:
                    for part in found.group(1).split(";"):
                        key, _, value = part.partition(":")
                        marker[key.strip()] = value.strip()
            else:
                out.append(Block(path, start + 1, lang, "\n".join(lines[start + 1:i]), marker))
                start = None
        elif start is None and line.strip():
            before = line
    assert start is None, f"{path}:{start + 1}: a fence that is never closed"
    return out


def shell_blocks() -> list[Block]:
    return [b for p in pages() for b in blocks_of(p) if b.lang in SHELL]


def commands(block: Block) -> list[list[str]]:
    """The block's commands as argument lists: continuation lines joined, comments and a `$ ` prompt
    dropped."""
    text = re.sub(r"\\\n\s*", " ", block.text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        words = shlex.split(line, comments=True)
        if words:
            out.append(words)
    return out


def flags_of(words: list[str]) -> list[str]:
    """What a covering test must hold: the long options (without a value given with '='); for a nox
    command, those after its '--'."""
    if words[0] == "nox":
        words = words[words.index("--") + 1:] if "--" in words else []
    found = (re.match(r"\[?(--[a-z][a-z0-9-]*)", w) for w in words)
    return [m.group(1) for m in found if m]


def subcommand_of(words: list[str]) -> str | None:
    """The harness subcommand a command runs ('run' for `nox -s matrix`), or None."""
    words = [w for w in words if "=" not in w or w.startswith("-")]  # VAR=value prefixes
    if words[:3] == ["python", "-m", "harness"] and len(words) > 3:
        return words[3]
    if words[:2] == ["nox", "-s"] and len(words) > 2:
        return SESSION_COMMAND.get(words[2], words[2])
    return None


@functools.cache
def harness_help(*command: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "harness", *command, "--help"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def options_of(command: str) -> set[str]:
    """The long options `python -m harness COMMAND --help` lists (not those its help texts mention),
    and those of its actions where it has some (`atlas run`, `atlas lookup`, ...)."""
    pattern = r"^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)"
    found = set(re.findall(pattern, harness_help(command), re.M))
    actions = re.search(r"^usage: .*? \{([a-z,]+)\}", harness_help(command), re.M | re.S) if command else None
    for action in actions.group(1).split(",") if actions else []:
        found |= set(re.findall(pattern, harness_help(command, action), re.M))
    return found


def nox_sessions() -> set[str]:
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                if "nox.session" in ast.unparse(deco):
                    named = re.search(r"name=['\"]([^'\"]+)", ast.unparse(deco))
                    names.add(named.group(1) if named else node.name)
    return names


def functions_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def problems_of(block: Block) -> list[str]:
    """Why this shell block is not exercised as the convention says (empty: it is)."""
    kinds = set(block.marker) & {"run", "covered-by", "needs"}
    if not kinds:
        return [f"{block.where}: a shell block with no <!-- run -->, <!-- covered-by: TEST --> or "
                f"<!-- needs: gpu|slurm --> before it"]
    bad = []
    if "needs" in block.marker and block.marker["needs"] not in NEEDS:
        bad.append(f"{block.where}: needs: {block.marker['needs']!r} is not one of {', '.join(NEEDS)}")
    if block.marker.get("needs") == "slurm" and "covered-by" not in block.marker:
        bad.append(f"{block.where}: a Slurm command names the test that runs it where Slurm is (covered-by:)")
    for words in commands(block):
        sub = subcommand_of(words)
        if words[:2] == ["nox", "-s"] and words[2] not in nox_sessions():
            bad.append(f"{block.where}: nox has no session {words[2]!r}")
        if words[:3] == ["python", "-m", "harness"] or (words[:2] == ["nox", "-s"] and words[2] in (
                "matrix", "build", "repro", "bisect", "report")):
            if sub not in re.search(r"\{([a-z,]+)\}", harness_help()).group(1).split(","):
                bad.append(f"{block.where}: the harness has no command {sub!r}")
            else:
                known = options_of(sub)
                bad += [f"{block.where}: `{sub}` has no option {f}" for f in flags_of(words) if f not in known]
        for word in words:
            if re.match(r"(matrices|examples|bench)/\S+\.(yaml|py)$", word) and not (ROOT / word).exists():
                bad.append(f"{block.where}: {word} does not exist")
    if "covered-by" in block.marker:
        tests = block.marker["covered-by"].split()
        if not tests:
            bad.append(f"{block.where}: covered-by names no test")
        texts = []
        for test in tests:
            file, _, name = test.partition("::")
            path = ROOT / file
            if not path.is_file() or (name and name.split("[")[0] not in functions_of(path)):
                bad.append(f"{block.where}: {test} does not exist")
                continue
            texts.append(path.read_text())
        for words in commands(block):
            wanted = flags_of(words) + ([subcommand_of(words)] if subcommand_of(words) else [])
            if texts and not any(all(w in text for w in wanted) for text in texts):
                bad.append(f"{block.where}: no test of {' '.join(tests)} holds all of {wanted} "
                           f"({shlex.join(words)})")
    return bad


@QUICK
def test_every_fenced_block_names_its_language():
    unnamed = [f"{b.where}" for p in pages() for b in blocks_of(p) if not b.lang]
    assert unnamed == [], f"fenced blocks without a language (a command could hide there): {unnamed}"


@QUICK
def test_every_shell_command_is_run_covered_or_marked():
    found = shell_blocks()
    assert len(found) >= 20 and any(b.path == README for b in found)
    bad = [p for b in found for p in problems_of(b)]
    assert bad == [], "\n".join(bad)


@QUICK
def test_the_convention_catches_an_unexercised_command(tmp_path):
    """The check is no formality: an unmarked block, a test that does not exist, a covering test
    without the command's flags, an option the harness lacks and an unknown nox session all fail."""
    page = tmp_path / "page.md"
    page.write_text("```sh\npython -m harness list matrices/smoke.yaml\n```\n\n"
                    "<!-- covered-by: tests/test_nothing.py::test_x -->\n```sh\nnox -s matrix\n```\n\n"
                    "<!-- covered-by: tests/test_smoke_real.py::test_smoke_matrix_in_virtualenvs -->\n"
                    "```sh\npython -m harness run matrices/smoke.yaml --speed-drop 5\n```\n\n"
                    "<!-- needs: gpu -->\n```sh\nnox -s matrixx -- matrices/nothing.yaml\n```\n")
    found = []
    for b in blocks_of(page):
        b = Block(ROOT / "docs" / "page.md", b.line, b.lang, b.text, b.marker)
        found += problems_of(b)
    text = "\n".join(found)
    assert "page.md:1: a shell block with no" in text
    assert "test_nothing.py::test_x does not exist" in text
    assert "`run` has no option --speed-drop" in text and "holds all of ['--speed-drop', 'run']" in text
    assert "no session 'matrixx'" in text and "matrices/nothing.yaml does not exist" in text


@QUICK
@pytest.mark.parametrize("block", [b for b in shell_blocks() if "run" in b.marker], ids=lambda b: b.where)
def test_the_cheap_commands_run(block):
    for words in commands(block):
        if words[:2] == ["python", "-m"]:
            words = [sys.executable, *words[1:]]
        proc = subprocess.run(words, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{block.where}: {shlex.join(words)} exited {proc.returncode}\n{proc.stderr}"


def _gpus() -> int:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    proc = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return proc.stdout.count("GPU ") if proc.returncode == 0 else 0


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in shell_blocks() if b.marker.get("needs") == "gpu"
                                   and "covered-by" not in b.marker], ids=lambda b: b.where)
def test_the_gpu_commands_run_on_a_gpu_host(block):
    if not _gpus():
        pytest.skip("no GPU here: the GPU commands run where there is one")
    for words in commands(block):
        proc = subprocess.run(shlex.join(words), shell=True, cwd=ROOT, capture_output=True, text=True,
                              timeout=3600)
        assert proc.returncode == 0, f"{block.where}: {shlex.join(words)}\n{proc.stderr[-2000:]}"


@QUICK
def test_the_readme_is_a_door():
    """At most ~250 lines: what it is, how to set up, the commands users came for, and links; the
    command CI runs is one the README shows."""
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_README_LINES
    shown = {shlex.join(w) for b in blocks_of(README) if b.lang in SHELL for w in commands(b)}
    for command in ("nox -s matrix", "nox -s report", "nox -s tests"):
        assert any(c.startswith(command) for c in shown), command
    assert any(c.startswith("nox -s repro") for c in shown)
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"-m nox -s tests\b", ci) and re.search(r"-m nox -s docs\b", ci)
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not re.match(r"[a-z]+:", target):
            assert (ROOT / unquote(target)).exists(), f"README.md links to {target}, which does not exist"


@QUICK
def test_the_cli_reference_names_every_option():
    """docs/reference/cli.md names every command and every option the command line has."""
    page = (DOCS / "reference" / "cli.md").read_text()
    commands_ = re.search(r"\{([a-z,]+)\}", harness_help()).group(1).split(",")
    missing = [f"## {c}" for c in commands_ if f"\n## {c}\n" not in page]
    for command in commands_:
        for option in sorted(options_of(command) - {"--help"}):
            if not re.search(rf"(?<![\w-]){option}(?![\w-])", page):
                missing.append(f"{command} {option}")
    assert missing == [], missing


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs") / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "WARNING" not in proc.stderr, proc.stderr
    return out


@QUICK
def test_the_site_builds_strictly_with_every_page(site):
    """`nox -s docs`'s build: no warning, and every Markdown page of docs/ became an HTML page."""
    for page in DOCS.rglob("*.md"):
        assert (site / page.relative_to(DOCS)).with_suffix(".html").is_file(), page


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key):
                self.links.append(attrs[key])


@functools.cache
def _parsed(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text())
    return parser


@QUICK
def test_every_relative_link_in_the_site_resolves(site):
    """Strict mode checks the Markdown's links; this checks what the theme made of them too: each
    relative href or src names a file of the site, and each #anchor an id on its page. External links
    are listed, not fetched (CI reaches no network but the package index)."""
    broken, external = [], set()
    for page in site.rglob("*.html"):
        if page.name == "404.html":  # a server's error page, shown at any depth: its links are root-relative
            continue
        for link in _parsed(page).links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//"):
                external.add(link)
                continue
            if parts.path.startswith("/"):
                broken.append(f"{page.relative_to(site)}: {link} (root-relative: not from disk)")
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {link}")
            elif parts.fragment and target.suffix == ".html" and parts.fragment not in _parsed(target).ids:
                broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    assert broken == [], broken
    print("external links (not fetched):", *sorted(external), sep="\n  ")
    assert all(urlsplit(link).scheme in ("http", "https", "mailto") for link in external), external


@QUICK
def test_the_site_opens_in_a_browser_and_its_navigation_leads_to_every_page(site):
    dom, errors = _browse(site / "index.html")
    assert errors == [], errors
    nav = re.findall(r'href="([^"#]+\.html)"', dom)
    for page in ("tutorial/first-matrix.html", "how-to/reproduce-your-crash.html", "reference/cli.html",
                 "explanation/design.html", "compatibility.html"):
        assert page in nav, (page, nav)
    dom, errors = _browse(site / "how-to" / "first-bad-release.html")
    assert errors == [], errors
    # the page is marked current in the navigation, and the navigation leads back home and across
    current = re.search(r'<li class="[^"]*current[^"]*"[^>]*>\s*<a[^>]*href="([^"]*)"', dom)
    assert current and current.group(1) in ("#", "first-bad-release.html", "./first-bad-release.html"), \
        current and current.group(0)
    assert '"../index.html"' in dom and '"../reference/cli.html"' in dom
    assert "<h1" in dom and "bisect" in dom


_COMMANDS = (r"(?:python -m harness |harness )?"
             r"(list|run|status|build|report|repro|bisect|diverge|reduce|watch|atlas|upgrade)")
_SPAN = re.compile(r"(?<!`)`(" + _COMMANDS + r"(?: [^`]*)?)`(?!`)")


def inline_commands(text: str) -> list[tuple[str, list[str]]]:
    """The harness commands a page names in its prose (`run --only GLOB`, `atlas lookup -r FILE`):
    (the span, its words), only those that name an option -- a bare `run` is a word, not a command."""
    found = []
    for match in _SPAN.finditer(text):
        span = match.group(1)
        try:
            words = shlex.split(span)
        except ValueError:
            continue
        if any(w.startswith("--") for w in words):
            found.append((span, words))
    return found


@QUICK
def test_every_command_and_flag_the_prose_names_exists():
    """A command named in a sentence is held to the command line as a shell block is: `run --cell`
    in a page, where `run` has no --cell, sends a reader to an error."""
    commands_ = re.search(r"\{([a-z,]+)\}", harness_help()).group(1).split(",")
    bad = []
    for path in pages():
        for span, words in inline_commands(path.read_text()):
            if words[:3] == ["python", "-m", "harness"]:
                words = words[3:]
            elif words[0] == "harness":
                words = words[1:]
            if words[0] not in commands_:
                continue
            known = options_of(words[0])
            for flag in flags_of(words):
                if flag not in known:
                    bad.append(f"{path.relative_to(ROOT)}: `{span}`: `{words[0]}` has no option {flag}")
    assert not bad, "\n".join(bad)


@QUICK
def test_the_readme_leads_to_every_page_a_user_reads():
    """The README's documentation table links every how-to, reference and explanation page, and the
    atlas: a page it leaves out is one a newcomer does not find."""
    text = README.read_text()
    linked = {unquote(t) for t in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)}
    wanted = [p.relative_to(ROOT).as_posix() for folder in ("how-to", "reference", "explanation")
              for p in sorted((DOCS / folder).glob("*.md"))] + ["docs/atlas.md"]
    missing = [p for p in wanted if p not in linked]
    assert not missing, f"README.md links none of: {', '.join(missing)}"
