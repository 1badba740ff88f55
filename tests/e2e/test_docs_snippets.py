"""Every code block of docs/LANGUAGES.md is executed by a test or quoted
from a file a test exercises, so the multi-language guide cannot rot.

Conventions (the line before a block's fence):
- ```python blocks run against a real server in e2e_docs_python
  (test_docs_python.py); nothing to mark.
- <!-- from: PATH --> : the block's lines, each stripped of surrounding
  whitespace and ignoring blank lines, appear as consecutive lines of PATH
  (same stripping). PATH must be one of QUOTABLE below: files that a ctest
  builds and runs.
- <!-- not run: REASON --> : only for build-tool configuration that cannot
  run here (xml, groovy, kotlin), with a reason.
Any other block fails the test, naming its line.
"""

import os
import re
import unittest

import harness

DOC = os.path.join(harness.SOURCE_DIR, "docs", "LANGUAGES.md")

# Quotable files and the tests that build and run them.
QUOTABLE = {
    "client/node/example.js": "node_example",
    "client/node/lib/client.js": "node_client",
    "client/node/lib/tensors.js": "node_tensors, node_client",
    "client/go/main.go": "go_example",
    "client/go/build.sh": "go_example (phasor_go_example runs it)",
    "tests/e2e/java/PhasorJavaExample.java": "java_example",
    "client/encoder_client.cc": "e2e_client_cli, client_panel_test",
    "client/tensor_io.cc": "client_tensor_io_test",
    "core/adapters/dtype.h": "dtype_test",
    "proto/CMakeLists.txt": "every build",
}
NOT_RUN_LANGUAGES = {"xml", "groovy", "kotlin"}

FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*(from|not run)\s*:\s*(.*?)\s*-->\s*$")


def blocks(path):
    """[(line, language, marker, argument, body lines)] of a Markdown file."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    found, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening or not opening.group(1):
            index += 1
            continue
        previous = index - 1
        while previous >= 0 and not lines[previous].strip():
            previous -= 1
        marker = MARKER.match(lines[previous]) if previous >= 0 else None
        start = index + 1
        index = start
        while index < len(lines) and lines[index].strip() != "```":
            index += 1
        if index == len(lines):
            raise AssertionError(f"{path}:{start}: fence never closed")
        found.append((start, opening.group(1),
                      marker.group(1) if marker else None,
                      marker.group(2) if marker else "",
                      lines[start:index]))
        index += 1
    return found


def stripped(lines):
    return [line.strip() for line in lines if line.strip()]


def quoted_in(body, text):
    """Whether the block's stripped lines run consecutively in `text`."""
    needle, hay = stripped(body), stripped(text.splitlines())
    return bool(needle) and any(hay[i:i + len(needle)] == needle
                                for i in range(len(hay) - len(needle) + 1))


class DocsSnippetsTest(unittest.TestCase):

    def test_quoting_rule(self):
        text = "a\n  b(1);\n\n  c();\nd\n"
        self.assertTrue(quoted_in(["b(1);", "", "    c();"], text))
        self.assertFalse(quoted_in(["b(1);", "d"], text))
        self.assertFalse(quoted_in(["b(2);"], text))
        self.assertFalse(quoted_in([], text))

    def test_every_block_is_run_or_quoted(self):
        found = blocks(DOC)
        languages = {language for _, language, _, _, _ in found}
        # The guide covers these five; a block of each must be there.
        for language in ("cpp", "python", "js", "go", "java"):
            self.assertIn(language, languages)
        counts = {}
        for line, language, marker, argument, body in found:
            where = f"docs/LANGUAGES.md:{line} ({language})"
            with self.subTest(block=where):
                if language == "python":
                    self.assertIsNone(marker, f"{where}: python blocks run "
                                      "in e2e_docs_python, unmarked")
                elif marker == "from":
                    self.assertIn(argument, QUOTABLE,
                                  f"{where}: {argument} is not a tested file")
                    with open(os.path.join(harness.SOURCE_DIR, argument),
                              encoding="utf-8") as f:
                        self.assertTrue(quoted_in(body, f.read()),
                                        f"{where}: not found verbatim in "
                                        f"{argument}")
                elif marker == "not run":
                    self.assertIn(language, NOT_RUN_LANGUAGES, where)
                    self.assertTrue(argument, f"{where}: give the reason")
                else:
                    self.fail(f"{where}: mark it <!-- from: PATH --> "
                              "(a tested file) or make it a python block")
                counts[marker or language] = counts.get(marker or language,
                                                        0) + 1
        print(f"\nchecked {len(found)} blocks: {counts}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
