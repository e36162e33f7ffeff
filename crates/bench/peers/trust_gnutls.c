/* Trust-store peer: GnuTLS's trust list.
 *
 *   trust_gnutls BUNDLE.pem
 *   trust_gnutls --version
 *
 * Adds BUNDLE with gnutls_x509_trust_list_add_trust_file (PEM), prints how
 * many certificates it took and exits.
 * Compiled by pivgate-bench: cc -O2 trust_gnutls.c -lgnutls
 */
#include <stdio.h>
#include <string.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: trust_gnutls BUNDLE.pem\n");
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("GnuTLS %s\n", gnutls_check_version(NULL));
        return 0;
    }
    gnutls_x509_trust_list_t list;
    int rc = gnutls_x509_trust_list_init(&list, 0);
    if (rc < 0) {
        fprintf(stderr, "trust_list_init: %s\n", gnutls_strerror(rc));
        return 1;
    }
    rc = gnutls_x509_trust_list_add_trust_file(list, argv[1], NULL, GNUTLS_X509_FMT_PEM, 0, 0);
    if (rc < 0) {
        fprintf(stderr, "add_trust_file: %s\n", gnutls_strerror(rc));
        return 1;
    }
    printf("%d\n", rc);
    gnutls_x509_trust_list_deinit(list, 1);
    return 0;
}
