#!/usr/bin/python3
"""Python peers for the pivgate PKI benchmarks, run with Debian's /usr/bin/python3.

Prints one line: "ok <median_ns> <count> [note]" or "unavailable <reason>" / "error <reason>".

  py_peers.py ssl-load <bundle.pem | dir> <iterations>
      ssl.SSLContext.load_verify_locations (OpenSSL underneath); a directory is
      loaded file by file (capath would be looked up lazily, not loaded).
  py_peers.py cryptography-load <bundle.pem | dir> <iterations>
      cryptography.x509.load_pem_x509_certificates on the file contents.
  py_peers.py cryptography-verify <root.pem> <intermediate.der> <leaf.der> <unix_time> <iterations>
      cryptography.x509.verification.PolicyBuilder (client verifier; it has no CRL support).
"""
import os
import ssl
import statistics
import sys
import time


def files_of(path):
    if os.path.isdir(path):
        return [os.path.join(path, n) for n in sorted(os.listdir(path)) if not n.startswith(".")]
    return [path]


# Stop repeating a measurement once the runs so far took this long.
RUN_BUDGET_NS = 5_000_000_000


def timed(fn, iterations):
    times = []
    count = 0
    for _ in range(iterations):
        t0 = time.perf_counter_ns()
        count = fn()
        times.append(time.perf_counter_ns() - t0)
        if sum(times) >= RUN_BUDGET_NS:
            break
    return int(statistics.median_low(times)), count


def ssl_load(path, iterations):
    files = files_of(path)

    def once():
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        for f in files:
            ctx.load_verify_locations(cafile=f)
        return ctx.cert_store_stats()["x509"]

    return timed(once, iterations)


def cryptography_load(path, iterations):
    try:
        from cryptography import x509
    except ImportError as e:
        return "unavailable", f"cryptography not importable: {e}"
    files = files_of(path)
    if hasattr(x509, "load_pem_x509_certificates"):
        def load_all(data):
            return len(x509.load_pem_x509_certificates(data))
        note = ""
    else:
        # cryptography < 39 has only the single-certificate loader: split the
        # bundle at each END line, as callers of those versions do.
        end = b"-----END CERTIFICATE-----"

        def load_all(data):
            n = 0
            for block in data.split(end)[:-1]:
                x509.load_pem_x509_certificate(block + end)
                n += 1
            return n
        import cryptography
        note = f"(cryptography {cryptography.__version__}: load_pem_x509_certificate per block)"

    def once():
        n = 0
        for f in files:
            with open(f, "rb") as fh:
                n += load_all(fh.read())
        return n

    ns, count = timed(once, iterations)
    return ns, f"{count} {note}".rstrip()


def cryptography_verify(root, inter, leaf, at, iterations):
    import datetime
    import cryptography
    from cryptography import x509
    try:
        from cryptography.x509.verification import PolicyBuilder, Store
    except ImportError:
        return "unavailable", (f"cryptography {cryptography.__version__} has no "
                               "x509.verification.PolicyBuilder (needs >= 42)")
    with open(root, "rb") as fh:
        store = Store(x509.load_pem_x509_certificates(fh.read()))
    with open(inter, "rb") as fh:
        inter_der = fh.read()
    with open(leaf, "rb") as fh:
        leaf_der = fh.read()
    when = datetime.datetime.fromtimestamp(int(at), tz=datetime.timezone.utc)
    builder = PolicyBuilder().store(store).time(when)
    if not hasattr(builder, "build_client_verifier"):
        return "unavailable", f"cryptography {cryptography.__version__} has no client verifier"
    verifier = builder.build_client_verifier()

    def once():
        chain = verifier.verify(x509.load_der_x509_certificate(leaf_der),
                                [x509.load_der_x509_certificate(inter_der)])
        return len(chain.chain)

    try:
        return timed(once, iterations)
    except Exception as e:  # the verifier's own error, reported as such
        return "error", f"{type(e).__name__}: {e}"


def main(argv):
    try:
        if len(argv) == 4 and argv[1] == "ssl-load":
            result = ssl_load(argv[2], int(argv[3]))
        elif len(argv) == 4 and argv[1] == "cryptography-load":
            result = cryptography_load(argv[2], int(argv[3]))
        elif len(argv) == 7 and argv[1] == "cryptography-verify":
            result = cryptography_verify(argv[2], argv[3], argv[4], argv[5], int(argv[6]))
        else:
            print("error usage: see the docstring of py_peers.py")
            return 2
    except Exception as e:
        print(f"error {type(e).__name__}: {e}")
        return 1
    if isinstance(result[0], str):
        print(f"{result[0]} {result[1]}")
        return 0 if result[0] == "unavailable" else 1
    print(f"ok {result[0]} {result[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
