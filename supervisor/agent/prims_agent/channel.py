"""The channel's framing, both ways: a 4-byte big-endian length, then UTF-8
JSON. What framing uses is bound when the agent starts: code in a cell
shares these modules and may patch them (`json.dumps = ...`), which must
not break the agent's own frames."""

import json
import os
import struct

CHANNEL_FD = 3
FRAME_IN_MAX = 4 * 1024 * 1024
FRAME_OUT_MAX = 1024 * 1024
# The agent exits with this when the code closed or replaced its channel.
CHANNEL_LOST_EXIT = 118

# Strict: NaN and infinities are no JSON, and the supervisor refuses a frame
# (or an output value) that holds them.
ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
DECODER = json.JSONDecoder()
HEADER = struct.Struct(">I")
read = os.read
write = os.write
fstat = os.fstat
exit_now = os._exit


def fit(msg):
    """Encode `msg` as a frame body, halving its lists until it fits."""
    while True:
        body = ENCODER.encode(msg).encode("utf-8")
        lists = [k for k, v in msg.items() if isinstance(v, list) and v]
        if len(body) <= FRAME_OUT_MAX or not lists:
            return body
        for k in lists:
            msg[k] = msg[k][: len(msg[k]) // 2]
