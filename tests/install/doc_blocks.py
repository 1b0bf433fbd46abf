"""The command blocks of the README and of every page in docs/, for tests/install/readme_commands.sh.

A ```sh or ```python block is a recipe a user copies: it runs as written. One marked
```sh fragment, ```python fragment or ```cpp fragment (GitHub highlights by the first word) is part
of the user's own program or of a deployment (a training loop, a host's /etc): it cannot run alone,
so it is checked instead: every `perseus` command line names a command and options that exist,
every repository path it names exists, Python fragments compile and every `perseus.x.y` they name
exists, C++ fragments name only `perseus::` types the installed headers declare. Other block kinds
(csv, json, text) are examples of files and output; `bash`, `console` and `shell` are refused
(write sh, so that the block is run or marked).

Usage:
  doc_blocks.py extract SRC OUT       the runnable blocks as OUT/<page>/NN.sh|NN.python, in order;
                                      README.md's (its Quickstart) in OUT/quickstart
  doc_blocks.py fragments SRC INCLUDE checks every fragment (`perseus` on PATH, this interpreter
                                      importing the installed package, INCLUDE its headers)
"""

import importlib
import pathlib
import re
import shlex
import subprocess
import sys

BLOCK = re.compile(r"^```(\w*)( fragment)?[ \t]*\n(.*?)^```", re.M | re.S)
RUNNABLE = ("sh", "python")
REFUSED = ("bash", "console", "shell", "shell-session", "py")


def pages(src):
    return [src / "README.md", *sorted((src / "docs").glob("*.md"))]


def blocks(page):
    """(line, kind, fragment, text) of each fenced block of `page`."""
    text = page.read_text()
    for match in BLOCK.finditer(text):
        kind, fragment, body = match.groups()
        line = text.count("\n", 0, match.start()) + 1
        if kind in REFUSED:
            sys.exit(f"{page}:{line}: a ```{kind} block; write ```sh (run by CI) or "
                     f"```sh fragment (checked, not run)")
        yield line, kind, bool(fragment), body


def extract(src, out):
    total = 0
    for page in pages(src):
        name = "quickstart" if page.name == "README.md" else page.stem
        runnable = [(kind, body) for _, kind, fragment, body in blocks(page)
                    if kind in RUNNABLE and not fragment]
        for n, (kind, body) in enumerate(runnable, 1):
            (out / name).mkdir(parents=True, exist_ok=True)
            (out / name / f"{n:02d}.{kind}").write_text(body)
        total += len(runnable)
    if not (out / "quickstart").is_dir():
        sys.exit("README.md has no runnable block (its Quickstart)")
    print(f"{total} runnable blocks")


def command_lines(body):
    """The block's commands: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", body)
    for line in joined.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError as e:
            raise AssertionError(f"cannot split '{line}': {e}") from None
        if words:
            yield words


def check_perseus_command(words):
    """`perseus SUB ... --opt ...`: the command exists and takes each option."""
    subcommands = []
    for word in words[1:]:
        if word.startswith("-") or not re.fullmatch(r"[a-z][a-z-]*", word):
            break
        subcommands.append(word)
    helped = subprocess.run(["perseus", *subcommands, "--help"], capture_output=True, text=True)
    assert helped.returncode == 0, f"'perseus {' '.join(subcommands)}' is no command"
    for word in words:
        option = word.split("=")[0]
        if option.startswith("--") and option != "--":
            assert re.search(rf"{re.escape(option)}\b", helped.stdout), \
                f"'perseus {' '.join(subcommands)}' has no option {option}"


def check_sh(src, body):
    for words in command_lines(body):
        for word in words:
            if re.match(r"(scripts|examples|data|tests|docs)/", word):
                assert (src / word.split("=")[-1]).exists(), f"{word} is not in the repository"
        if words[0] == "perseus":
            check_perseus_command(words)


def check_python(body):
    compile(body, "<fragment>", "exec")
    for name in sorted(set(re.findall(r"\bperseus(?:\.\w+)+", body))):
        parts = name.split(".")
        thing = importlib.import_module(parts[0])
        for n, part in enumerate(parts[1:], 2):
            if not hasattr(thing, part):  # a submodule not imported by its package
                try:
                    importlib.import_module(".".join(parts[:n]))
                except ModuleNotFoundError:
                    raise AssertionError(f"{name} does not exist") from None
            if not hasattr(thing, part):
                raise AssertionError(f"{name} does not exist")
            thing = getattr(thing, part)


def check_cpp(include, body):
    headers = "\n".join(p.read_text() for p in include.rglob("*.hpp"))
    for name in sorted(set(re.findall(r"perseus::(?:\w+::)*(\w+)", body))):
        assert re.search(rf"\b(class|struct|enum class|using|namespace)\s+{name}\b", headers), \
            f"perseus::...::{name} is declared in no installed header"


def fragments(src, include):
    checked = 0
    for page in pages(src):
        for line, kind, fragment, body in blocks(page):
            if not fragment:
                continue
            try:
                {"sh": lambda: check_sh(src, body), "python": lambda: check_python(body),
                 "cpp": lambda: check_cpp(include, body)}[kind]()
            except KeyError:
                sys.exit(f"{page}:{line}: a ```{kind} fragment; only sh, python and cpp are checked")
            except AssertionError as e:
                sys.exit(f"{page.relative_to(src)}:{line}: {e}")
            checked += 1
    print(f"{checked} fragments checked")


if __name__ == "__main__":
    verb, source, where = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    {"extract": extract, "fragments": fragments}[verb](source, where)
