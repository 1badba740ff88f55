"""Type hints and docstrings on every public function of phasor_client,
checked.

Walks phasor_client.__all__: every exported function, and every public
method (plus __init__, properties and static/class methods) that the
package's own classes define, and asserts each has its own docstring and
annotations on every parameter and on the return. Exempt: self/cls, *args
and **kwargs, members a class inherits from outside the package (grpc.Call,
tuple, object: not ours to document), and exported modules (`pb`, the
generated phasor.v1 messages).

Needs no server: only the package as built (E2E_PYTHON_DIR, see harness.py).
"""

import inspect
import types
import typing
import unittest

import harness

phasor_client = harness.phasor_client
PACKAGE = phasor_client.__name__


def _ours(obj):
    """Whether the package defines `obj` (rather than grpc, numpy, ...)."""
    module = getattr(obj, "__module__", None) or ""
    return module == PACKAGE or module.startswith(PACKAGE + ".")


def _members(cls):
    """(qualified name, function) for the public callables the package's
    own classes in cls's MRO define; properties as their getter."""
    for owner in cls.__mro__:
        if not _ours(owner):
            continue
        for name, value in vars(owner).items():
            if name.startswith("_") and name != "__init__":
                continue
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            elif isinstance(value, property):
                value = value.fget
            if isinstance(value, types.FunctionType):
                yield f"{owner.__name__}.{name}", value


def public_callables():
    """(qualified name, function) for every function and method this test
    covers, each function once (a method shared through inheritance is
    reported under the class that defines it)."""
    seen = set()
    for name in sorted(phasor_client.__all__):
        value = getattr(phasor_client, name)
        if isinstance(value, types.ModuleType):
            continue  # pb: generated messages, documented by encoder.proto.
        if inspect.isclass(value):
            members = _members(value)
        elif callable(value):
            members = [(name, value)]
        else:
            continue
        for qualified, function in members:
            if function not in seen:
                seen.add(function)
                yield qualified, function


def problems(function):
    """What `function` lacks: "docstring", "return", parameter names."""
    missing = []
    if not (function.__doc__ or "").strip():
        missing.append("docstring")
    # signature() follows functools.wraps, so a decorated method is judged
    # by the function it wraps.
    signature = inspect.signature(function)
    for index, parameter in enumerate(signature.parameters.values()):
        if index == 0 and parameter.name in ("self", "cls"):
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if parameter.annotation is parameter.empty:
            missing.append(parameter.name)
    if signature.return_annotation is signature.empty:
        missing.append("return")
    return missing


class PythonApiSurfaceTest(unittest.TestCase):
    def test_the_walk_sees_the_api(self):
        # Guards the walk itself: a broken walk would pass vacuously.
        names = {name for name, _ in public_callables()}
        for expected in ("EncoderClient.__init__", "EncoderClient.apply_rope",
                         "EncoderClient.health", "PhasorError.code",
                         "PhasorError.message", "PhasorError.from_rpc_error",
                         "InvalidInputError.__init__", "FrameResult.__init__",
                         "to_tensor", "encoder_spec", "feature_names",
                         "rope_spec_from_hf", "FrameError.__init__"):
            self.assertIn(expected, names)
        # grpc.Call's and tuple's own members are not the package's.
        self.assertNotIn("RopeResult.count", names)

    def test_every_public_function_has_docstring_and_annotations(self):
        report = [f"{name}: {', '.join(missing)}"
                  for name, function in public_callables()
                  for missing in [problems(function)] if missing]
        if report:
            self.fail("public functions lacking a docstring or annotations "
                      "(parameter names, or 'return'):\n  "
                      + "\n  ".join(report))

    def test_annotations_resolve(self):
        # String annotations (from __future__ import annotations) must name
        # something real: typing.get_type_hints evaluates them in their
        # module, plus `pd`, which modules import only under TYPE_CHECKING
        # since pandas is optional.
        try:
            import pandas
        except ImportError:
            self.skipTest("pandas is not installed")
        for name, function in public_callables():
            with self.subTest(name):
                typing.get_type_hints(function, localns={"pd": pandas})


class OptionalPandasTest(unittest.TestCase):
    def test_imports_without_pandas_and_says_what_encode_frame_needs(self):
        # pandas is the package's optional extra: a process without it (a
        # stand-in module that fails to import hides Debian's) imports the
        # package, and encode_frame alone asks for it.
        import os
        import subprocess
        import sys
        import tempfile
        with tempfile.TemporaryDirectory() as hide:
            with open(os.path.join(hide, "pandas.py"), "w") as f:
                f.write("raise ImportError('pandas hidden by the test')\n")
            code = ("import phasor_client\n"
                    "client = phasor_client.EncoderClient('127.0.0.1:9')\n"
                    "try:\n"
                    "    client.encode_frame(None)\n"
                    "except phasor_client.InvalidInputError as e:\n"
                    "    print(e.details())\n")
            result = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True,
                env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                    [hide, harness.PYTHON_DIR])), timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("encode_frame needs pandas", result.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
