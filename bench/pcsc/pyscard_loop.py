#!/usr/bin/python3
"""Peer for the host-overhead benchmark: N transmits of one APDU through
pyscard on the same reader, run with Debian's /usr/bin/python3 (python3-pyscard).
Prints the median microseconds per APDU over the given number of rounds."""
import statistics
import sys
import time

from smartcard.System import readers

def main():
    reader_name, apdu_hex, n, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    apdu = list(bytes.fromhex(apdu_hex))
    reader = next((r for r in readers() if str(r) == reader_name), None)
    if reader is None:
        print(f"reader {reader_name!r} not found", file=sys.stderr)
        sys.exit(2)
    conn = reader.createConnection()
    conn.connect()
    per = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            _, sw1, sw2 = conn.transmit(apdu)
        per.append((time.perf_counter() - t0) * 1e6 / n)
        if (sw1, sw2) != (0x90, 0x00):
            print(f"unexpected status {sw1:02X}{sw2:02X}", file=sys.stderr)
            sys.exit(1)
    conn.disconnect()
    print(f"{statistics.median(per):.2f}")

if __name__ == "__main__":
    main()
