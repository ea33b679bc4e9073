#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Sends JSON-line ops to colod-testpeer's control socket (nri/testpeer/README.md).

  peerctl.py SOCKET '{"op":"list"}' [more ops...]   prints each reply on one line
Exit 1 if a reply is {"ok": false} or the socket fails; every call is bounded by --timeout.
"""
import json
import socket
import sys


def main() -> int:
    args = sys.argv[1:]
    timeout = 30.0
    if len(args) >= 2 and args[0] == "--timeout":
        timeout = float(args[1])
        args = args[2:]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 3
    path, ops = args[0], args[1:]
    rc = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        f = s.makefile("rwb")
        for op in ops:
            json.loads(op)  # refuse malformed input before sending
            f.write(op.encode() + b"\n")
            f.flush()
            line = f.readline()
            if not line:
                print("peerctl: connection closed", file=sys.stderr)
                return 1
            sys.stdout.write(line.decode())
            if not json.loads(line).get("ok", False):
                rc = 1
    return rc


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError) as e:
        print(f"peerctl: {e}", file=sys.stderr)
        sys.exit(1)
