"""``tabsafe serve``: the table builder — an HTTP API and a web page that protect every table."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser, argv: object = ()) -> None:
    parser.add_argument("--data", required=True, metavar="DIR",
                        help="data folder: persons.parquet and meta.yaml (as `tabsafe synth` writes)")
    parser.add_argument("--config", metavar="FILE", help="service settings (YAML): rules, methods, limits, store")
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on")
    parser.add_argument("--workers", type=int, help="server processes (default 1)")
    parser.add_argument("--prepare", action="store_true",
                        help="prepare the records for serving (done once; also on first start) and exit")


def run(args: argparse.Namespace) -> int:
    import os

    from tabsafe.errors import InputError
    from tabsafe.service.planned import open_data
    from tabsafe.service.prepared import open_prepared, prepare
    from tabsafe.service.settings import Settings

    settings = Settings.load(data=args.data, config=args.config, host=args.host, port=args.port,
                             workers=args.workers)
    _check_meta(settings.data)
    # the prepared records, kept cubes, answers, the store and its audit key: its owner's only
    os.umask(0o077)
    if args.prepare and settings.engine != "prepared":
        raise InputError(f"setting 'engine' is {settings.engine!r}: the records are counted where they are, "
                         f"there is nothing to prepare", where=args.config)
    if args.prepare:
        path = prepare(settings)
        data = open_prepared(settings, prepare_if_missing=False)
        from tabsafe.service.planned import make_builder

        make_builder(settings, data).warm()  # the grouped records and first cubes, kept beside the records
        print(f"prepared {data.n:,} records of {len(data.variables)} variables in {path}")
        return 0
    if args.port is None and (args.config is None or "port" not in settings.model_fields_set):
        raise InputError("give the port to listen on (--port)")
    import uvicorn

    from tabsafe.service.workers import check_free

    check_free(settings.host, int(settings.port))  # before saying it serves
    data = open_data(settings)
    where = f"http://{settings.host}:{settings.port}/"
    served = f"{data.n:,} records" if data.n is not None else f"the records counted by {settings.engine}"
    print(f"serving {served} from {settings.data} at {where} "
          f"(API keys {'required' if settings.auth else 'off'}; {settings.workers} worker(s))", flush=True)
    # asyncio's loop, not uvloop: with uvloop, of 50 clients connecting at once to a busy server
    # the last were first served after 2 s (measured: their requests reached the route that late);
    # with asyncio's loop the slowest of 2,000 answers took 0.3 s
    common = {"host": settings.host, "port": settings.port, "log_level": "debug" if settings.debug else "warning",
              "access_log": settings.access_log, "server_header": False, "loop": "asyncio"}
    if settings.workers == 1:
        from tabsafe.service.app import create_app

        uvicorn.run(create_app(settings, data=data), **common)
    else:
        from tabsafe.service.workers import serve_workers

        options = {k: v for k, v in common.items() if k not in ("host", "port")}
        return serve_workers(settings, options)
    return 0


def _check_meta(data: object) -> None:
    """The data folder's ``meta.yaml`` read as every command reads it, before anything is served:
    an invalid one is one line naming the file (not a YAML parser's trace)."""
    from pathlib import Path

    from tabsafe.errors import InputError
    from tabsafe.io import read_meta

    folder = Path(str(data))
    if not folder.is_dir():
        raise InputError("--data folder does not exist" if not folder.exists() else "--data is not a folder",
                         where=str(folder))
    meta = folder / "meta.yaml"
    if meta.exists():
        read_meta(meta)
