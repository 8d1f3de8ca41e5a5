"""``gapbench obliq build``: an OBLIQ-style benchmark task built from a user's own corpus (see :mod:`.build`)."""

from ...errors import ObliqBuildError
from ...schemas.obliq_build import ObliqBuildReport
from .build import build_obliq
from .estimate import estimate
from .estimate import render as render_estimate
from .options import ObliqBuildOptions, read_lens

__all__ = ["ObliqBuildError", "ObliqBuildOptions", "ObliqBuildReport", "build_obliq", "estimate", "read_lens",
           "render_estimate"]
