"""``patchsync status``: per-log checkpoints of a target, and the tail daemon's state."""

from __future__ import annotations

import argparse
import datetime
import json
from typing import Any

from patchsync.cli.common import Subcommands, add_target_flag, open_target


def register(sub: Subcommands) -> None:
    status = sub.add_parser(
        "status",
        help="show per-log checkpoints of a target",
        description="Per source log: position, patches, last id, time.",
    )
    add_target_flag(status)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.add_argument("--state-dir", metavar="DIR", help="a tail daemon's state directory (see tail --state-dir)")
    status.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from patchsync.apply.target import dumpable
    from patchsync.sources import is_address
    from patchsync.tail.state import default_state_dir, lag_bytes, read_status

    target = open_target(args.target, existing=True)
    try:
        sources = dumpable(target).sources()
    finally:
        target.close()
    state_dir = args.state_dir or default_state_dir(args.target)
    daemon = read_status(state_dir) if state_dir is not None else {}
    rows: list[dict[str, Any]] = []
    for st in sources:
        cp = st.checkpoint
        when = (
            datetime.datetime.fromtimestamp(cp.updated_at, datetime.UTC).isoformat(timespec="seconds")
            if cp.updated_at
            else None
        )
        if is_address(st.source):
            rows.append(_stream_row(st.source, cp, when, daemon.get(st.source)))
            continue
        rows.append(
            {
                "source": st.source,
                "position": {"offset": cp.offset, "frame": cp.frame, "row": cp.row},
                "patches": cp.patches,
                "last_id": cp.last_id,
                "updated_at": when,
                "fingerprint": cp.fingerprint,
                "lag_bytes": lag_bytes(st.source, cp),
                "tail": daemon.get(st.source),
            }
        )
    if args.json:
        print(json.dumps({"target": args.target, "sources": rows}, indent=2))
        return 0
    if not rows:
        print("no logs applied")
    for r in rows:
        if "stream" in r:
            print(_stream_line(r))
            continue
        pos = r["position"]
        print(
            f"{r['source']}: byte {pos['offset']}, frame {pos['frame']}, row {pos['row']}; "
            f"{r['patches']} patches; last id {r['last_id'] or '-'}; at {r['updated_at'] or '-'}"
            + (f"; {r['lag_bytes']} bytes behind" if r["lag_bytes"] is not None else "")
            + _tail_state(r["tail"])
        )
    return 0


def _stream_row(source: str, cp: Any, when: str | None, tail: dict[str, Any] | None) -> dict[str, Any]:
    """A stream replica's row: its checkpoint's sequence, and its lag asked of the server."""
    from patchsync.tail.network_follower import status_lag

    return {
        "source": source,
        "stream": True,
        "position": {"seq": cp.offset, "row": cp.row_at},
        "patches": cp.patches,
        "last_id": cp.last_id,
        "updated_at": when,
        "fingerprint": cp.fingerprint,
        **status_lag(source, cp),
        "tail": tail,
    }


def _stream_line(r: dict[str, Any]) -> str:
    if "lag_error" in r:
        lag = f"lag unknown, the server could not be asked ({r['lag_error']})"
    else:
        lag = f"{r['lag_messages']} messages, {r['lag_seconds']:.1f} s behind"
    return (
        f"{r['source']}: sequence {r['position']['seq']}; {r['patches']} patches; last id {r['last_id'] or '-'}; "
        f"at {r['updated_at'] or '-'}; {lag}" + _tail_state(r["tail"])
    )


def _tail_state(rec: dict[str, Any] | None) -> str:
    """What the daemon's status says of a source: its state while a daemon runs; once none
    runs, that it does not, and the error it stopped on."""
    if not rec:
        return ""
    if rec.get("running"):
        text = f"; tail {rec.get('state')}"
        return text + (f": {rec['error']}" if rec.get("error") else "")
    if rec.get("state") == "failed":
        return f"; tail failed: {rec.get('error')}; not running"
    return "; tail not running"
