/* Trust-store peer: OpenSSL's X509_STORE filled one certificate at a time.
 *
 *   trust_openssl BUNDLE.pem
 *   trust_openssl --version
 *
 * Reads every PEM certificate of BUNDLE with PEM_read_bio_X509 and adds it
 * with X509_STORE_add_cert (which looks for the same certificate already in
 * the store before adding it), prints how many the store holds and exits.
 * Compiled by pivgate-bench: cc -O2 trust_openssl.c -lcrypto
 */
#include <stdio.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: trust_openssl BUNDLE.pem\n");
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("%s\n", OpenSSL_version(OPENSSL_VERSION));
        return 0;
    }
    BIO *in = BIO_new_file(argv[1], "r");
    if (in == NULL) {
        ERR_print_errors_fp(stderr);
        return 1;
    }
    X509_STORE *store = X509_STORE_new();
    X509 *cert;
    while ((cert = PEM_read_bio_X509(in, NULL, NULL, NULL)) != NULL) {
        if (X509_STORE_add_cert(store, cert) != 1) {
            ERR_print_errors_fp(stderr);
            return 1;
        }
        X509_free(cert);
    }
    /* The loop ends at the end of the file (PEM_R_NO_START_LINE) or on an error. */
    unsigned long e = ERR_peek_last_error();
    if (e != 0 && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)) {
        ERR_print_errors_fp(stderr);
        return 1;
    }
    STACK_OF(X509_OBJECT) *objs = X509_STORE_get0_objects(store);
    printf("%d\n", sk_X509_OBJECT_num(objs));
    BIO_free(in);
    X509_STORE_free(store);
    return 0;
}
