"""Runs the ```python blocks of README.md and docs/*.md against a real
phasor-server, so the documented Python cannot rot.

Conventions for doc writers:
- Every ```python block runs, in file order, in one namespace per file (a
  later block may use names an earlier one defined), with the repository
  root as the working directory.
- The server address in the examples is `localhost:50051`, the default; the
  runner replaces that text with the test server's address. Write it so,
  rather than another host or port, in blocks meant to run.
- A block that cannot run here says why on the line before its fence:
    <!-- not run: needs a Kubernetes cluster -->
  A marker without a reason fails the test.
- A block that needs an optional module names it:
    <!-- needs: torch -->
  and is skipped, with a message, when the module is not installed.
Undefined names, a failed call or a wrong assertion fail the test at the
block's line in the Markdown file (tracebacks point there).
"""

import contextlib
import glob
import importlib.util
import io
import os
import re
import sys
import tempfile
import unittest

import harness

FENCE_OPEN = re.compile(r"^```python\s*$")
FENCE_CLOSE = re.compile(r"^```\s*$")
MARKER = re.compile(r"^<!--\s*(not run|needs)\s*:?\s*(.*?)\s*-->\s*$")
DEFAULT_ADDRESS = "localhost:50051"


class Block:
    def __init__(self, path, line, source, marker, argument):
        self.path, self.line, self.source = path, line, source
        self.marker, self.argument = marker, argument

    def __repr__(self):
        return f"{os.path.relpath(self.path, harness.SOURCE_DIR)}:{self.line}"


def python_blocks(path):
    """The ```python blocks of a Markdown file, with the marker (if any) on
    the last non-blank line before each fence."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    blocks, index = [], 0
    while index < len(lines):
        if not FENCE_OPEN.match(lines[index]):
            index += 1
            continue
        fence = index
        previous = fence - 1
        while previous >= 0 and not lines[previous].strip():
            previous -= 1
        marker = MARKER.match(lines[previous]) if previous >= 0 else None
        index += 1
        body = []
        while index < len(lines) and not FENCE_CLOSE.match(lines[index]):
            body.append(lines[index])
            index += 1
        if index == len(lines):
            raise AssertionError(f"{path}:{fence + 1}: ```python never closed")
        blocks.append(Block(path, fence + 2, "\n".join(body),
                            marker.group(1) if marker else None,
                            marker.group(2) if marker else ""))
        index += 1
    return blocks


def doc_files():
    return [os.path.join(harness.SOURCE_DIR, "README.md")] + sorted(
        glob.glob(os.path.join(harness.SOURCE_DIR, "docs", "*.md")))


class DocsPythonTest(harness.ServerTestCase):

    def test_parser(self):
        # The marker and line conventions above, on a made-up file.
        sample = ("text\n<!-- not run: shows a cluster name -->\n\n"
                  "```python\nx = 1\n```\n<!-- needs: torch -->\n"
                  "```python\nimport torch\n```\n```python\ny = 2\n```\n")
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "sample.md")
            with open(path, "w", encoding="utf-8") as f:
                f.write(sample)
            blocks = python_blocks(path)
        self.assertEqual([(b.line, b.marker, b.argument, b.source)
                          for b in blocks],
                         [(5, "not run", "shows a cluster name", "x = 1"),
                          (9, "needs", "torch", "import torch"),
                          (12, None, "", "y = 2")])

    def test_docs_python_blocks_run(self):
        ran = {}
        for path in doc_files():
            namespace = {"__name__": "__doc_example__"}
            for block in python_blocks(path):
                with self.subTest(block=repr(block)):
                    if block.marker == "not run":
                        self.assertTrue(block.argument,
                                        f"{block}: say why the block does "
                                        f"not run: <!-- not run: reason -->")
                        continue
                    if block.marker == "needs":
                        missing = [name.strip() for name in
                                   block.argument.split(",") if
                                   importlib.util.find_spec(name.strip())
                                   is None]
                        if missing:
                            self.skipTest(f"{block} needs {missing}")
                    self.run_block(block, namespace)
                    ran[path] = ran.get(path, 0) + 1
        print(f"\nran {sum(ran.values())} Python blocks: " + ", ".join(
            f"{os.path.relpath(path, harness.SOURCE_DIR)} {count}"
            for path, count in ran.items()), file=sys.stderr)
        client_md = os.path.join(harness.SOURCE_DIR, "docs", "CLIENT.md")
        self.assertGreaterEqual(ran.get(client_md, 0), 2, ran)

    def run_block(self, block, namespace):
        source = block.source.replace(DEFAULT_ADDRESS, self.server.target)
        # Blank lines in front so that line numbers are the Markdown file's.
        code = compile("\n" * (block.line - 1) + source, block.path, "exec")
        output = io.StringIO()
        cwd = os.getcwd()
        os.chdir(harness.SOURCE_DIR)
        try:
            with contextlib.redirect_stdout(output):
                exec(code, namespace)  # noqa: S102  (our own docs)
        except Exception as error:
            raise AssertionError(
                f"{block} failed: {type(error).__name__}: {error}\n"
                f"its output:\n{output.getvalue()}") from error
        finally:
            os.chdir(cwd)


if __name__ == "__main__":
    unittest.main(verbosity=2)
