"""One default service config for every client: client/service_config.json.

The C++ library embeds it at build time (E2E_PRINT_SERVICE_CONFIG_BIN prints
kDefaultServiceConfig), the Python package ships it as package data and
loads it into DEFAULT_SERVICE_CONFIG, and the Node package reads it into
DEFAULT_SERVICE_CONFIG (from a checkout, the repository's file; packed, its
own copy: node/test/pack.test.js). Each must be the file's JSON, and the
Python package as built must carry the file itself.

Needs no server. The Node comparison needs node with the package's
dependencies installed (CMake's phasor_node target); without
E2E_NODE (a tree built without PHASOR_LANGUAGE_CLIENTS) it is skipped.
"""

import json
import os
import subprocess
import unittest

import harness

SOURCE = os.path.join(harness.SOURCE_DIR, "client", "service_config.json")


def the_file():
    with open(SOURCE, encoding="utf-8") as f:
        return json.load(f)


class ServiceConfigTest(unittest.TestCase):
    def test_the_file_is_the_documented_policy(self):
        config = the_file()
        method = config["methodConfig"][0]
        self.assertEqual(method["name"], [{"service": "phasor.v1.Encoder"}])
        self.assertEqual(method["retryPolicy"]["retryableStatusCodes"],
                         ["UNAVAILABLE", "CANCELLED", "RESOURCE_EXHAUSTED"])
        self.assertEqual(config["healthCheckConfig"],
                         {"serviceName": "phasor.v1.Encoder"})

    def test_cpp_client_embeds_the_file(self):
        printed = subprocess.run(
            [os.environ["E2E_PRINT_SERVICE_CONFIG_BIN"]], check=True,
            capture_output=True, text=True, timeout=60).stdout
        self.assertEqual(json.loads(printed), the_file())

    def test_python_client_loads_the_file(self):
        self.assertEqual(
            json.loads(harness.phasor_client.DEFAULT_SERVICE_CONFIG),
            the_file())
        # Package data, as a wheel carries it: the file itself.
        packaged = os.path.join(
            os.path.dirname(harness.phasor_client.__file__),
            "service_config.json")
        with open(packaged, "rb") as f, open(SOURCE, "rb") as g:
            self.assertEqual(f.read(), g.read())

    def test_node_client_loads_the_file(self):
        node = os.environ.get("E2E_NODE")
        if not node:
            self.skipTest("E2E_NODE unset: built without "
                          "PHASOR_LANGUAGE_CLIENTS")
        package = os.path.join(harness.SOURCE_DIR, "client", "node")
        printed = subprocess.run(
            [node, "-e", "process.stdout.write("
             "require('./lib').DEFAULT_SERVICE_CONFIG)"],
            cwd=package, check=True, capture_output=True, text=True,
            timeout=60).stdout
        self.assertEqual(json.loads(printed), the_file())


if __name__ == "__main__":
    unittest.main()
