"""docs/pictures/draw.py draws its figures from a real phasor-server.

The script is run as a user runs it (it starts its own server from the
binary under test) into a temporary directory; its printed digests of the
plotted arrays must equal those of this test's own calls, through the
Python client, to a second server; the PNGs must exist, be images and show
more than a blank canvas.
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import harness

SCRIPT = os.path.join(harness.SOURCE_DIR, "docs", "pictures", "draw.py")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def load_draw():
    spec = importlib.util.spec_from_file_location("draw", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class PicturesTest(harness.ServerTestCase):

    CLIENT_DEADLINE_SECONDS = 30.0

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.draw = load_draw()
        cls.directory = tempfile.TemporaryDirectory()
        run = subprocess.run(
            [sys.executable, SCRIPT, "--server", harness.SERVER_BIN,
             "--python_dir", harness.PYTHON_DIR, "--out", cls.directory.name],
            capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            raise AssertionError(f"draw.py failed ({run.returncode}):\n"
                                 f"{run.stderr}")
        cls.summary = json.loads(run.stdout)

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()
        super().tearDownClass()

    def test_sinusoidal_is_the_servers(self):
        table, similarity, info = self.draw.fetch_sinusoidal(self.client)
        drawn = self.summary["sinusoidal"]
        self.assertEqual(drawn["table_sha256"], self.draw.digest(table))
        self.assertEqual(drawn["similarity_sha256"],
                         self.draw.digest(similarity))
        self.assertEqual(drawn["nearest_code_offset"],
                         info.nearest_code_offset)
        # The curve is Describe's Σ_j cos(ω_j·k), ω_j = 10000^(−2j/d).
        dim = self.draw.SINUSOIDAL["dim"]
        omega = 10000.0 ** (-2.0 * np.arange(dim // 2) / dim)
        k = np.arange(len(drawn["similarity"]))
        np.testing.assert_allclose(
            drawn["similarity"], np.cos(np.outer(k, omega)).sum(axis=1),
            rtol=0, atol=1e-9)

    def test_rope_is_the_servers(self):
        rotated = self.draw.fetch_rope(self.client)
        drawn = self.summary["rope"]["heads"]
        self.assertEqual(set(drawn), set(self.draw.ROPE_SCALINGS))
        for name, (head, factor) in rotated.items():
            with self.subTest(scaling=name):
                self.assertEqual(drawn[name]["sha256"], self.draw.digest(head))
                self.assertEqual(drawn[name]["attention_factor"], factor)
        # Unscaled, pair 0 turns by 1 radian per position.
        np.testing.assert_allclose(drawn["none"]["position_1_pair_0"],
                                   [np.cos(1.0), np.sin(1.0)], atol=1e-6)
        # Linear scaling divides every angle by the factor.
        np.testing.assert_allclose(
            drawn["linear, factor 4"]["position_1_pair_0"],
            [np.cos(0.25), np.sin(0.25)], atol=1e-6)

    def test_calendar_is_the_servers(self):
        times, _, features, names = self.draw.fetch_calendar(
            self.client, harness.phasor_client.feature_names)
        drawn = self.summary["calendar"]
        self.assertEqual(drawn["rows"], len(times))
        self.assertEqual(drawn["columns"], names)
        self.assertEqual(drawn["features_sha256"], self.draw.digest(features))
        # The week crosses Berlin's change from CET (+1) to CEST (+2).
        self.assertEqual(drawn["utc_offsets"], [1.0, 2.0])

    def test_pngs_are_images_of_something(self):
        import matplotlib.image
        for figure in ("sinusoidal", "rope", "calendar"):
            with self.subTest(figure=figure):
                path = self.summary[figure]["file"]
                self.assertEqual(os.path.dirname(path), self.directory.name)
                with open(path, "rb") as f:
                    self.assertEqual(f.read(8), PNG_MAGIC)
                self.assertGreater(os.path.getsize(path), 20000)
                pixels = matplotlib.image.imread(path)
                self.assertGreater(pixels.shape[0], 300)
                self.assertGreater(pixels.shape[1], 600)
                # Far from a blank canvas: many distinct colours.
                colours = np.unique(
                    (pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3),
                    axis=0)
                self.assertGreater(len(colours), 200)


if __name__ == "__main__":
    unittest.main(verbosity=2)
