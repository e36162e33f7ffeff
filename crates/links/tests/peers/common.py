"""Shared helpers for the libosdp peers: a pseudo-terminal channel and JSON lines."""
import json
import os
import sys
import tty

from osdp import Channel


class TtyChannel(Channel):
    """libosdp channel over a tty opened in raw, non-blocking mode."""

    def __init__(self, path):
        super().__init__()
        self.fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        tty.setraw(self.fd)

    def read(self, max_bytes):
        try:
            return os.read(self.fd, max_bytes)
        except BlockingIOError:
            return b""

    def write(self, buf):
        try:
            return os.write(self.fd, bytes(buf))
        except BlockingIOError:
            return 0

    def flush(self):
        pass


def plain(value):
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def emit(obj):
    sys.stdout.write(json.dumps(plain(obj)) + "\n")
    sys.stdout.flush()
