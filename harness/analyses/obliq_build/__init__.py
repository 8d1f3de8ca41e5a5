"""``gapbench obliq build``: an OBLIQ-style benchmark task built from a user's own corpus (see :mod:`.build`)."""

from .build import build_obliq
from .estimate import estimate, render as render_estimate
from ...errors import ObliqBuildError
from .options import ObliqBuildOptions, read_lens
from ...schemas.obliq_build import ObliqBuildReport

__all__ = ["ObliqBuildError", "ObliqBuildOptions", "ObliqBuildReport", "build_obliq", "estimate", "read_lens",
           "render_estimate"]
