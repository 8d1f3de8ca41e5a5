"""The report tests' inputs (tests/test_report.py's ``build_inputs``: two real runs of ImpliRet multispeaker/wknow, a
real gap analysis against the local LLM server, the real analysis files of tests/fixtures/outputs_v0_1), built once
in the whole test session for every xdist worker: tests/test_report.py and tests/test_report_browser.py read them,
and each built them again in its own worker.

Loaded as a pytest plugin by tests/conftest.py (every tests/fx_*.py is); ``once_per_session`` is tests/fx_models.py's.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def report_inputs(once_per_session) -> dict:
    """``build_inputs``'s paths (``runs``, ``gap`` and one folder per analysis), made once per session; read them,
    never write into them."""
    from test_report import build_inputs

    return build_inputs(once_per_session("report-inputs", build_inputs))
