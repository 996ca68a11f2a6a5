"""tau-ARGUS interoperability: its files read and written, its batch jobs run headless.

One module per file kind — :mod:`.rda` (metadata), :mod:`.asc` (microdata), :mod:`.tab`
(tabular data), :mod:`.hst` (a-priori), :mod:`.hrc` (hierarchies), :mod:`.cdl` (codelists),
:mod:`.grc` (recodes), :mod:`.arb` (batch files) — each with a reader that names the file, line
and field of anything malformed and a writer that is its inverse; :mod:`.writetable` writes the
formats of ``<WRITETABLE>``; :mod:`.runner` executes a batch file with tabsafe's methods and says
what it mapped and what it could not run. Source: the tau-ARGUS manual and sdcTools/tauargus.

Its cell key p-tables (``data/cellkey``: count p-tables and the magnitude ones of
``data/cellkey/Magnitude``, ``j``/``v`` in half steps with a ``type`` column) are read and written
by :mod:`tabsafe.protect.ptable.files`, not here.
"""
