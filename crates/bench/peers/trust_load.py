"""Trust-store peers in Python.

    python3 trust_load.py ssl BUNDLE.pem            # ssl.SSLContext.load_verify_locations
    python3 trust_load.py cryptography BUNDLE.pem   # cryptography.x509.load_pem_x509_certificates
    python3 trust_load.py --version ssl|cryptography

Loads BUNDLE once, prints how many certificates it holds, and exits; run by
pivgate-bench as a whole process. `cryptography` parses the certificates
into a list and builds no store; load_pem_x509_certificates needs
cryptography 39 or later.
"""

import sys


def version(mode: str) -> int:
    if mode == "ssl":
        import ssl

        print(f"Python {sys.version.split()[0]}, {ssl.OPENSSL_VERSION}")
        return 0
    import cryptography
    from cryptography import x509

    if not hasattr(x509, "load_pem_x509_certificates"):
        print(
            f"cryptography {cryptography.__version__} has no load_pem_x509_certificates (39 or later has)",
            file=sys.stderr,
        )
        return 1
    print(f"Python {sys.version.split()[0]}, cryptography {cryptography.__version__}")
    return 0


def main() -> int:
    modes = ("ssl", "cryptography")
    if len(sys.argv) != 3 or (sys.argv[1] not in modes and sys.argv[1] != "--version"):
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1] == "--version":
        return version(sys.argv[2])
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "ssl":
        import ssl

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(cafile=path)
        print(ctx.cert_store_stats()["x509_ca"])
    else:
        from cryptography import x509

        with open(path, "rb") as f:
            print(len(x509.load_pem_x509_certificates(f.read())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
