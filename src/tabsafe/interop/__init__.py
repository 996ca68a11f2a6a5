"""Exchange with other tools and standards: tau-ARGUS jobs and files (:mod:`.argus`), releases as
SDMX-CSV (:mod:`.sdmx`) and as CSV with a CSV-W metadata file (:mod:`.csvw`).

Readers turn foreign files into tabsafe's values (hierarchies, tables, statuses, parameters) and
say what is malformed in one line naming the file, the line and the field — never the content of
the file beyond that. Writers are their inverse: what a reader reads, the writer writes back to
the same value.
"""
