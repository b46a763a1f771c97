"""The fenced blocks of README.md and docs/*.md, and a shell that runs them as a reader would.

An HTML comment on the line right before a fence says what the block is:

* ``<!-- doc-test: NAME -->``: commands that tests/integration/test_docs_commands.py runs;
* ``<!-- doc-output: NAME -->``: what block NAME prints: each line must appear in its output,
  where ``...`` and a ``<placeholder>`` stand for any text within the line;
* ``<!-- doc-file: NAME PATH -->``: a file the reader writes at PATH before running what follows;
* ``<!-- doc-not-run: NAME -->``: commands the test deliberately does not run (it says why).

A block without a marker must name its content in its info string (``yaml``, ``json``, ``ini``,
``text``): a block of commands (no info string, ``sh``, ``bash``, ``shell``, ``console``) always
says whether it is run.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCUMENTS = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
COMMAND_INFO = {"", "sh", "bash", "shell", "console"}
MARKER_KINDS = {"doc-test", "doc-output", "doc-file", "doc-not-run"}

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!--\s*(?P<kind>doc-[a-z-]+):\s*(?P<name>[\w.-]+)(?:\s+(?P<arg>\S+))?\s*-->\s*$")


@dataclass
class Block:
    document: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    info: str
    text: str
    kind: str | None = None  # the marker's kind, None without a marker
    name: str | None = None
    arg: str | None = None  # doc-file: the path

    @property
    def where(self) -> str:
        return "%s:%d" % (self.document, self.line)

    @property
    def is_command(self) -> bool:
        return self.info in COMMAND_INFO


def parse(path: Path) -> tuple[list[Block], list[str]]:
    """The fenced blocks of a Markdown file, and the problems of its markers."""
    lines = path.read_text().splitlines()
    document = str(path.relative_to(REPO))
    blocks, problems = [], []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            marker = _MARKER.match(lines[index])
            if marker or lines[index].lstrip().startswith("<!-- doc-"):
                following = lines[index + 1] if index + 1 < len(lines) else ""
                if not marker or not _FENCE.match(following):
                    problems.append("%s:%d: a doc marker must be the line right before a fence: %s"
                                    % (document, index + 1, lines[index].strip()))
            index += 1
            continue
        indent, fence = opening.group("indent"), opening.group("fence")
        end = index + 1
        while end < len(lines) and not re.match(r"^\s*%s\s*$" % re.escape(fence), lines[end]):
            end += 1
        if end == len(lines):
            problems.append("%s:%d: unclosed fence" % (document, index + 1))
            break
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[index + 1:end]]
        block = Block(document, index + 1, opening.group("info").strip(), "\n".join(body) + "\n")
        marker = _MARKER.match(lines[index - 1]) if index else None
        if marker:
            block.kind, block.name, block.arg = marker.group("kind"), marker.group("name"), marker.group("arg")
            if block.kind not in MARKER_KINDS:
                problems.append("%s: unknown marker %s" % (block.where, block.kind))
            elif (block.kind == "doc-file") != (block.arg is not None):
                problems.append("%s: only doc-file takes a path, and it needs one" % block.where)
        elif block.is_command:
            problems.append("%s: a block of commands needs a doc-test or doc-not-run marker "
                            "(or an info string such as text or yaml if it is not commands): %s"
                            % (block.where, block.text.splitlines()[0] if block.text.strip() else ""))
        blocks.append(block)
        index = end + 1
    return blocks, problems


def all_blocks() -> tuple[list[Block], list[str]]:
    blocks, problems = [], []
    for path in DOCUMENTS:
        found, wrong = parse(path)
        blocks += found
        problems += wrong
    return blocks, problems


def expected_line_pattern(line: str) -> re.Pattern:
    """A line of a doc-output block as a pattern: ``...`` and ``<placeholder>`` match any text
    within one line."""
    parts = re.split(r"(\.\.\.|<[A-Za-z][^<>\n]*>)", line.strip())
    return re.compile("".join(".*?" if index % 2 else re.escape(part) for index, part in enumerate(parts)))


def substitute(text: str, substitutions: dict) -> str:
    for old, new in substitutions.items():
        text = text.replace(old, new)
    return text


@dataclass
class BlockRun:
    failed_commands: int
    output: str

    def missing(self, expected_lines) -> list[str]:
        return [line for line in expected_lines if not expected_line_pattern(line).search(self.output)]


class ShellSession:
    """One bash process that runs blocks one after the other, like a reader's terminal: exports
    and background jobs (``&``, ``kill %1``) carry over from block to block. A block is sourced
    with stdin from /dev/null; a command of it that fails is counted (an ERR trap)."""

    def __init__(self, cwd: Path, env: dict):
        self.cwd = Path(cwd)
        self.scripts = Path(tempfile.mkdtemp(prefix="doc-blocks-", dir=self.cwd))
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=cwd, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True, bufsize=1)
        threading.Thread(target=self._read, daemon=True).start()
        self._send("__doc_failed=0; trap '__doc_failed=$((__doc_failed + 1))' ERR")

    def _read(self):
        for line in self.proc.stdout:
            with self._changed:
                self._lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._lines.append(None)  # end of output: the shell is gone
            self._changed.notify_all()

    def _send(self, text: str):
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def run(self, script: str, timeout: float = 600, expected=(), grace: float = 30) -> BlockRun:
        """Run ``script`` (for up to ``timeout`` seconds); return the count of failed commands and
        what it printed. Lines of ``expected`` still missing when the script is done are waited for
        up to ``grace`` seconds more: background jobs it started (a simulator printing its address)
        print them after it."""
        path = self.scripts / ("%s.sh" % uuid.uuid4().hex)
        path.write_text(script)
        mark = "__doc_block_done_%s" % uuid.uuid4().hex
        with self._changed:
            start = len(self._lines)
        # The ERR trap fires for the failed command and, when it was the block's last, for `source`.
        self._send("__doc_failed=0; source %s < /dev/null; __doc_status=$?; "
                   "printf '\\n%s %%s\\n' \"$((__doc_failed - (__doc_status != 0)))\"" % (path, mark))
        deadline = time.monotonic() + timeout
        failed = None
        with self._changed:
            while True:
                lines = self._lines[start:]
                printed = "\n".join(line for line in lines if line is not None and not line.startswith(mark))
                done = [line for line in lines if line is not None and line.startswith(mark)]
                if done:
                    if failed is None:
                        deadline = min(deadline, time.monotonic() + grace)
                    failed = int(done[0].split()[1])
                    run = BlockRun(failed, printed)
                    if failed or not run.missing(expected):
                        return run
                if None in lines:
                    return BlockRun(-1 if failed is None else failed, printed + "\n(the shell exited)")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if failed is None:
                        return BlockRun(-1, printed + "\n(timed out after %s s)" % timeout)
                    return BlockRun(failed, printed)
                self._changed.wait(remaining)

    def close(self):
        """Stop the shell and whatever it left running in the background."""
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
