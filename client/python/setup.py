"""setuptools hook: generate phasor_client/_proto at build time.

Metadata lives in pyproject.toml; this file adds the two things it cannot
say: the version (read from the top-level CMakeLists.txt, one version for
the whole project) and a build_py step that runs build_stubs.py into the
build directory, so the wheel carries the generated modules and the
clients' default service config (client/service_config.json, outside this
directory) and importing the package never runs a compiler.
"""

import importlib.util
import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _build_stubs_module():
    # Loaded by path: a PEP 517 backend does not promise this directory is
    # on sys.path.
    spec = importlib.util.spec_from_file_location(
        "phasor_build_stubs", os.path.join(HERE, "build_stubs.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithStubs(build_py):
    """build_py, then protoc into <build_lib>/phasor_client/_proto and the
    default service config (client/service_config.json) beside the
    package's modules."""

    def run(self) -> None:
        super().run()
        if not self.dry_run:
            stubs = _build_stubs_module()
            stubs.copy_service_config(self.build_lib)
            stubs.generate(self.build_lib)


setup(version=_build_stubs_module().project_version(),
      cmdclass={"build_py": BuildPyWithStubs})
