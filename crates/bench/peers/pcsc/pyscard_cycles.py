#!/usr/bin/python3
"""Peer of the `pcsc` section of pivgate-bench: N PC/SC transaction cycles
(SCardBeginTransaction, SCardTransmit of one APDU, SCardEndTransaction)
through pyscard's PC/SC binding on one reader, run with Debian's
/usr/bin/python3 (python3-pyscard).

Usage: pyscard_cycles.py READER APDU_HEX N WARMUP
Prints the nanoseconds of each measured cycle, one per line; exits 1 on a
PC/SC error or a status word other than 9000."""
import sys
import time

from smartcard import scard


def check(what, hresult):
    if hresult != scard.SCARD_S_SUCCESS:
        print(f"{what}: {scard.SCardGetErrorMessage(hresult)}", file=sys.stderr)
        sys.exit(1)


def main():
    reader, apdu_hex, n, warmup = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    apdu = list(bytes.fromhex(apdu_hex))
    hresult, ctx = scard.SCardEstablishContext(scard.SCARD_SCOPE_USER)
    check("SCardEstablishContext", hresult)
    hresult, card, proto = scard.SCardConnect(
        ctx, reader, scard.SCARD_SHARE_SHARED, scard.SCARD_PROTOCOL_T0 | scard.SCARD_PROTOCOL_T1
    )
    check("SCardConnect", hresult)
    clock = time.perf_counter_ns
    out = []
    for i in range(warmup + n):
        t0 = clock()
        hresult = scard.SCardBeginTransaction(card)
        check("SCardBeginTransaction", hresult)
        hresult, response = scard.SCardTransmit(card, proto, apdu)
        check("SCardTransmit", hresult)
        hresult = scard.SCardEndTransaction(card, scard.SCARD_LEAVE_CARD)
        check("SCardEndTransaction", hresult)
        t1 = clock()
        if response[-2:] != [0x90, 0x00]:
            print(f"unexpected status {bytes(response[-2:]).hex()}", file=sys.stderr)
            sys.exit(1)
        if i >= warmup:
            out.append(t1 - t0)
    scard.SCardDisconnect(card, scard.SCARD_LEAVE_CARD)
    scard.SCardReleaseContext(ctx)
    sys.stdout.write("\n".join(map(str, out)) + "\n")


if __name__ == "__main__":
    main()
