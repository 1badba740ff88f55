"""phasor-server and phasor-client say what they are: --help lists every
flag the sources define, with its default and (where it has one) its
PHASOR_* environment twin, and `phasor-client <command> --help` the flags
of that command; --version names the project version from
CMakeLists.txt, the git revision the build was configured from and the
build type.

Environment (tests/e2e/CMakeLists.txt): E2E_GIT_REVISION and E2E_BUILD_TYPE
are what CMake configured, so the binaries are checked against the build
they came from, and the revision against the repository."""

import os
import re
import subprocess
import unittest

import harness


def flags_defined_in(*paths):
    """{name: default as written} of ABSL_FLAG(type, name, default, ...) in
    the given source files."""
    flags = {}
    for path in paths:
        with open(os.path.join(harness.SOURCE_DIR, path)) as f:
            text = f.read()
        for match in re.finditer(
                r"ABSL_FLAG\(\s*([\w:<>]+)\s*,\s*(\w+)\s*,\s*([^,]+?)\s*,",
                text):
            flags[match.group(2)] = (match.group(1), match.group(3))
    return flags


def run(binary, *args, env=None):
    return subprocess.run([binary, *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, check=False,
                          env={**os.environ, **(env or {})})


def project_version():
    with open(os.path.join(harness.SOURCE_DIR, "CMakeLists.txt")) as f:
        match = re.search(r"project\(\s*phasor\s+VERSION\s+([\d.]+)", f.read())
    return match.group(1)


class HelpTest(unittest.TestCase):

    def help_lines(self, binary):
        result = run(binary, "--help")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("No flags matched", result.stdout)
        # "  --name=default  (env VARIABLE)"
        lines = {}
        for line in result.stdout.splitlines():
            match = re.match(r"^  --(\w+)=(.*?)(?:  \(env (\w+)\))?$", line)
            if match:
                lines[match.group(1)] = (match.group(2), match.group(3))
        return result.stdout, lines

    def test_server_help_lists_every_flag_with_env_twin_and_default(self):
        text, lines = self.help_lines(harness.SERVER_BIN)
        defined = flags_defined_in("server/flags.cc")
        self.assertGreaterEqual(len(defined), 18)
        self.assertEqual(set(lines), set(defined))
        for name, (default, env) in lines.items():
            self.assertEqual(env, "PHASOR_" + name.upper(), name)
        self.assertEqual(lines["max_message_bytes"][0], str(64 << 20))
        self.assertEqual(lines["grpc_address"][0], '"0.0.0.0:50051"')
        self.assertEqual(lines["log_format"][0], '"text"')
        self.assertEqual(lines["access_log"][0], "false")
        self.assertEqual(lines["shutdown_grace_seconds"][0], "10")
        # Each flag's help text follows it.
        self.assertIn("host:port the gRPC server listens on.", text)
        self.assertTrue(text.startswith("phasor-server " + project_version()))

    def test_docs_list_every_server_flag(self):
        # The flag tables of docs/DEPLOY.md and docs/API.md name every flag
        # (and its twin) the binary has, and no other.
        defined = set(flags_defined_in("server/flags.cc"))
        for doc in ("DEPLOY.md", "API.md"):
            with open(os.path.join(harness.SOURCE_DIR, "docs", doc)) as f:
                rows = [line for line in f if re.match(r"^\| `--\w+`", line)]
            documented = {name for row in rows
                          for name in re.findall(r"`--(\w+)`", row.split("|")[1])}
            self.assertEqual(documented, defined, doc)
            for row in rows:
                for name in re.findall(r"`--(\w+)`", row.split("|")[1]):
                    self.assertIn(f"`PHASOR_{name.upper()}`", row, doc)

    def test_server_env_twins_in_help_are_read(self):
        # The help names PHASOR_LOG_FORMAT; a bad value there is refused,
        # proving the server reads that very variable.
        result = run(harness.SERVER_BIN, "--grpc_address=127.0.0.1:0",
                     "--metrics_address=", env={"PHASOR_LOG_FORMAT": "xml"})
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("--log_format: must be text or json", result.stderr)
        result = run(harness.SERVER_BIN, "--grpc_address=127.0.0.1:0",
                     env={"PHASOR_FAILED_CALL_LOG_BURST": "many"})
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("PHASOR_FAILED_CALL_LOG_BURST=many", result.stderr)

    def test_client_help_lists_every_flag(self):
        text, lines = self.help_lines(harness.CLIENT_BIN)
        defined = flags_defined_in("client/cli/common.cc",
                                   "client/cli/commands.cc",
                                   "client/cli/infer_command.cc")
        self.assertGreaterEqual(len(defined), 60)
        self.assertEqual(set(lines), set(defined))
        # The client's one environment twin, shared with the server.
        twins = {name: env for name, (_, env) in lines.items() if env}
        self.assertEqual(twins, {"max_message_bytes": "PHASOR_MAX_MESSAGE_BYTES"})
        self.assertEqual(lines["max_message_bytes"][0], str(64 << 20))
        self.assertEqual(lines["deadline_ms"][0], "30000")
        self.assertEqual(lines["target"][0], '"localhost:50051"')
        self.assertIn("encode-positions", text)  # The commands, too.
        self.assertIn("connection and output flags:", text)
        self.assertIn("command flags:", text)

    def client_commands(self):
        """{command: summary} from the global help's command list."""
        text = run(harness.CLIENT_BIN, "--help").stdout
        listed = text.split("commands:\n", 1)[1].split("\n\n", 1)[0]
        return dict(line.split(None, 1) for line in listed.splitlines())

    def test_client_command_help_lists_its_own_flags(self):
        commands = self.client_commands()
        self.assertIn("alibi", commands)
        shown = set()
        _, everything = self.help_lines(harness.CLIENT_BIN)
        for command, summary in commands.items():
            result = run(harness.CLIENT_BIN, command, "--help")
            self.assertEqual(result.returncode, 0, command + result.stderr)
            text = result.stdout
            # What the command does, its flags, then the connection flags.
            self.assertIn(f"phasor-client {command}: {summary}", text)
            self.assertIn("connection flags:", text)
            self.assertNotIn("commands:", text)
            lines = {}
            for line in text.splitlines():
                match = re.match(r"^  --(\w+)=(.*?)(?:  \(env (\w+)\))?$", line)
                if match:
                    lines[match.group(1)] = (match.group(2), match.group(3))
            # Each as the global help shows it, default and twin included.
            for name, value in lines.items():
                self.assertEqual(value, everything[name], (command, name))
            for name in ("target", "deadline_ms", "max_message_bytes"):
                self.assertIn(name, lines, command)
            self.assertLess(len(text.splitlines()), 120, command)
            shown |= set(lines)
        # Every command flag belongs to some command.
        defined = flags_defined_in("client/cli/commands.cc",
                                   "client/cli/infer_command.cc")
        self.assertEqual(set(defined) - shown, set())

        alibi = run(harness.CLIENT_BIN, "alibi", "--help").stdout
        for name in ("num_heads", "q_len", "k_len", "causal", "slopes_out",
                     "output_dtype", "out"):
            self.assertIn(f"  --{name}=", alibi)
        for name in ("query", "observations_csv", "dim", "time_unit"):
            self.assertNotIn(f"  --{name}=", alibi)
        # Wherever --help and the command stand, and `help <command>` too; a
        # flag's separate value is not taken for the command.
        self.assertEqual(run(harness.CLIENT_BIN, "--help", "alibi").stdout, alibi)
        self.assertEqual(run(harness.CLIENT_BIN, "help", "alibi").stdout, alibi)
        self.assertEqual(run(harness.CLIENT_BIN, "--service", "alibi", "health",
                             "--help").stdout,
                         run(harness.CLIENT_BIN, "health", "--help").stdout)
        observations = run(harness.CLIENT_BIN, "encode-observations",
                           "--help").stdout
        for name in ("time_unit", "observations_csv", "timestamps", "spec"):
            self.assertIn(f"  --{name}=", observations)


class VersionTest(unittest.TestCase):

    def check_version(self, binary, program):
        result = run(binary, "--version")
        self.assertEqual(result.returncode, 0, result.stderr)
        line = result.stdout.strip()
        self.assertNotIn("NDEBUG", line)
        match = re.fullmatch(
            re.escape(program) + r" (\S+) \((git [0-9a-f]{12}|git revision "
            r"unknown), (\w+) build\)", line)
        self.assertIsNotNone(match, line)
        self.assertEqual(match.group(1), project_version())
        self.assertEqual(match.group(3), os.environ["E2E_BUILD_TYPE"])
        configured = os.environ["E2E_GIT_REVISION"]
        if configured:
            self.assertEqual(match.group(2), "git " + configured)
        else:
            self.assertEqual(match.group(2), "git revision unknown")
        return configured

    def test_both_binaries_report_the_configured_version(self):
        server_revision = self.check_version(harness.SERVER_BIN, "phasor-server")
        self.check_version(harness.CLIENT_BIN, "phasor-client")
        git_dir = os.path.join(harness.SOURCE_DIR, ".git")
        if os.path.exists(git_dir):
            # Built from a checkout: the revision is one of its commits.
            self.assertTrue(server_revision,
                            "built from a git checkout but no revision")
            result = subprocess.run(
                ["git", "-C", harness.SOURCE_DIR, "cat-file", "-e",
                 server_revision + "^{commit}"],
                capture_output=True, text=True, timeout=60, check=False)
            self.assertEqual(result.returncode, 0, result.stderr)

    def test_build_info_metric_carries_the_version(self):
        with harness.Server() as server:
            samples = harness.parse_metrics(server.metrics())
        info = [dict(labels) for (name, labels), value in samples.items()
                if name == "phasor_build_info" and value == 1]
        self.assertEqual(len(info), 1)
        self.assertEqual(info[0]["version"], project_version())
        self.assertEqual(info[0]["revision"],
                         os.environ["E2E_GIT_REVISION"] or "unknown")


if __name__ == "__main__":
    unittest.main(verbosity=2)
