"""``tabsafe argus run JOB.arb``: run a tau-ARGUS batch file headless.

Each command of the job prints one line — ``job.arb:12: <SUPPRESS> mapped: …`` — saying whether
it ran as in tau-ARGUS, ran as tabsafe's nearest method (and how that differs), could not run,
or was ignored; ``--report FILE.json`` writes the same as JSON. The job's ``<WRITETABLE>`` files
are checked before any work and written together at the end (formats with original values as
private files). The command exits 0 when every command ran or was mapped, 1 when some could not
run (:mod:`tabsafe.interop.argus.runner`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from tabsafe.cli.common import say
from tabsafe.errors import InputError


def add_arguments(parser: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    parser.add_argument("action", choices=["run"], help="run: execute a batch file headless")
    parser.add_argument("job", metavar="JOB.arb", help="the tau-ARGUS batch file")
    parser.add_argument("--report", metavar="FILE.json", help="also write what each command became as JSON")


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from tabsafe.interop.argus.runner import run_job
    from tabsafe.io import Outputs

    job = Path(args.job)
    if not job.is_file():
        raise InputError("the batch file does not exist", where=args.job)
    if args.report and not args.report.lower().endswith(".json"):
        raise InputError("the report is JSON: give a .json file", where=args.report)
    with Outputs(inputs=[job]) as out:
        report_path = out.plan(args.report, option="report") if args.report else None
        result = run_job(job, out)
        if report_path is not None:
            out.write_text(report_path, json.dumps(result.to_json(), indent=2) + "\n")
    for step in result.steps:
        say(step.render(result.source), quiet=args.quiet)
    return 1 if any(s.outcome == "not-run" for s in result.steps) else 0
