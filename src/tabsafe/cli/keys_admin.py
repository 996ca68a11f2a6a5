"""``tabsafe keys-admin``: users and API keys of the table builder, and its audit log."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser, argv: object = ()) -> None:
    parser.add_argument("--data", required=True, metavar="DIR", help="the served data folder")
    parser.add_argument("--config", metavar="FILE", help="the service settings (for the store's place)")
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = sub.add_parser("add", help="make a key for a user (shown once)")
    add.add_argument("user")
    add.add_argument("--rate", type=int, metavar="N", help="queries per minute (default: the service's)")
    add.add_argument("--quota", type=int, metavar="N", help="queries per UTC day (default: the service's)")
    add.add_argument("--note", help="what the key is for")
    sub.add_parser("list", help="list keys (never their secrets)")
    revoke = sub.add_parser("revoke", help="revoke a key at once")
    revoke.add_argument("key_id", metavar="ID")
    audit = sub.add_parser("audit", help="export the audit log")
    audit.add_argument("--out", required=True, metavar="FILE", help="output file (.jsonl or .csv)")
    sub.add_parser("verify", help="check the audit log's hash chain")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tabsafe.errors import InputError
    from tabsafe.service.settings import Settings
    from tabsafe.service.store import Store

    data = Path(args.data)
    if not data.is_dir():  # never make a folder, nor a store in one, for a mistyped path
        raise InputError("--data is not a folder" if data.exists() else "--data folder does not exist", where=str(data))
    settings = Settings.load(data=args.data, config=args.config)
    if not settings.store_path.parent.is_dir():
        raise InputError("the store's folder does not exist", where=str(settings.store_path.parent))
    if settings.store_path.exists() and not settings.store_path.is_file():
        raise InputError("the store is not a file", where=str(settings.store_path))
    if args.action != "add" and not settings.store_path.is_file():
        raise InputError("no service store here yet (tabsafe keys-admin --data DIR add USER makes one)",
                         where=str(settings.store_path))
    store = Store(settings.store_path, key_path=settings.audit_key_path)
    if args.action == "add":
        text, key = store.add_key(args.user, rate_per_minute=args.rate, quota_per_day=args.quota, note=args.note)
        print(f"key {key.id} for {key.user} (shown once, keep it secret):")
        print(text)
    elif args.action == "list":
        print("id            user                 created                        status   rate/min  quota/day")
        for k in store.keys():
            status = "revoked" if k.revoked else "active"
            print(f"{k.id:13} {k.user[:20]:20} {k.created:30} {status:8} {k.rate_per_minute or '-':>8}  "
                  f"{k.quota_per_day or '-':>9}")
    elif args.action == "revoke":
        key = store.revoke(args.key_id)
        print(f"key {key.id} of {key.user} revoked at {key.revoked}")
    elif args.action == "audit":
        from tabsafe.io import Outputs

        out = Path(args.out)
        fmt = {".jsonl": "jsonl", ".csv": "csv"}.get(out.suffix.lower())
        if fmt is None:
            raise InputError("the audit export is .jsonl or .csv", where=str(out))
        text = store.export(fmt)
        with Outputs([str(settings.store_path)]) as outputs:
            path = outputs.plan(out, kind="evaluation")
            outputs.write_text(path, text)
        print(f"wrote {store.audit_count():,} audit rows to {out}")
    elif args.action == "verify":
        broken = store.verify()
        if broken is not None:
            raise InputError(f"the audit log's hash chain breaks at row {broken}")
        print(f"the audit log is intact ({store.audit_count():,} rows)")
    return 0
