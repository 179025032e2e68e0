"""Builds the SDK's optional C speed-up; everything else is in pyproject.toml.

``nexagauge.sdk._gate`` (``nexagauge/sdk/_gate.c``) runs the secret gate's common case in one pass
over each text. It is optional: without a C compiler (or Python headers) the build skips it and the
SDK uses its Python gate, with the same verdicts (tests/sdk/test_native_gate.py); nothing is
installed beyond OpenTelemetry either way.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "nexagauge.sdk._gate",
            sources=["nexagauge/sdk/_gate.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
