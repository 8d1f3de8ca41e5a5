"""``gapbench obliq build``: an OBLIQ-style benchmark task built from a user's own corpus (see :mod:`.build`). The
package re-exports nothing: import each name from the module that defines it (:mod:`.build`, :mod:`.options`,
:mod:`.estimate`; the report is :class:`gapbench.schemas.obliq_build.ObliqBuildReport`)."""
