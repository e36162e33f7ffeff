/*
 * Peer measurements for the pivgate PKI benchmarks: OpenSSL and GnuTLS doing
 * the same work as pivgate on the same files, timed in-process so that
 * process start-up and dynamic linking are not counted.
 *
 * Build: cc -O2 -o peers bench/peers/peers.c -lssl -lcrypto -lgnutls
 *
 * Every command prints one line: "ok <median_ns> <count>" where count is
 * what the library reports it loaded (certificates) or the verification
 * result code, or "error <reason>" with a non-zero exit status.
 *
 *   peers openssl-load <bundle.pem | dir> <iterations>
 *   peers gnutls-load  <bundle.pem | dir> <iterations>
 *   peers openssl-verify <root.pem> <intermediate.der> <leaf.der> <crls.pem>
 *                        <unix_time> <iterations>
 *   peers openssl-verify-pool <anchor.pem> <pool.pem> <crls.pem> <leaf.pem>
 *                        <unix_time> <policy_oid> <iterations>
 *       path building through a pool of untrusted CA certificates (loaded
 *       once), CRL checking of the whole chain, explicit policy; count is the
 *       length of the chain found (anchor included).
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

/* Stop repeating a measurement once the runs so far took this long. */
#define RUN_BUDGET_NS 5000000000LL

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static long long median(long long *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_ll);
    return v[n / 2];
}

static int fail(const char *what) {
    printf("error %s\n", what);
    return 1;
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Sorted list of regular files in a directory (full paths). */
static char **list_dir(const char *dir, int *count) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    int cap = 256, n = 0;
    char **names = malloc(sizeof(char *) * (size_t)cap);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap *= 2;
            names = realloc(names, sizeof(char *) * (size_t)cap);
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    *count = n;
    return names;
}

/* One OpenSSL trust-store load: X509_STORE_load_locations for a bundle, or
 * once per file for a directory (a CApath directory would be looked up lazily
 * by hash and not loaded at all, which is not the same work). */
static int openssl_load_once(const char *path, char **files, int nfiles, long long *ns, int *loaded) {
    long long t0 = now_ns();
    X509_STORE *store = X509_STORE_new();
    int ok = 1;
    if (files) {
        for (int i = 0; i < nfiles && ok; i++) ok = X509_STORE_load_locations(store, files[i], NULL);
    } else {
        ok = X509_STORE_load_locations(store, path, NULL);
    }
    STACK_OF(X509_OBJECT) *objs = X509_STORE_get0_objects(store);
    *loaded = sk_X509_OBJECT_num(objs);
    long long t1 = now_ns();
    X509_STORE_free(store);
    *ns = t1 - t0;
    return ok;
}

static int gnutls_load_once(const char *path, int dir, long long *ns, int *loaded) {
    long long t0 = now_ns();
    gnutls_x509_trust_list_t list;
    if (gnutls_x509_trust_list_init(&list, 0) < 0) return 0;
    int ret = dir ? gnutls_x509_trust_list_add_trust_dir(list, path, NULL, GNUTLS_X509_FMT_PEM, 0, 0)
                  : gnutls_x509_trust_list_add_trust_file(list, path, NULL, GNUTLS_X509_FMT_PEM, 0, 0);
    long long t1 = now_ns();
    gnutls_x509_trust_list_deinit(list, 1);
    *ns = t1 - t0;
    *loaded = ret;
    return ret >= 0;
}

static int cmd_load(int use_gnutls, const char *path, int iters) {
    long long *times = calloc((size_t)iters, sizeof *times);
    int loaded = 0, nfiles = 0, dir = is_dir(path);
    char **files = NULL;
    if (dir && !use_gnutls) {
        files = list_dir(path, &nfiles);
        if (!files) return fail("cannot read directory");
    }
    if (use_gnutls) gnutls_global_init();
    long long spent = 0;
    int runs = 0;
    for (int i = 0; i < iters && spent < RUN_BUDGET_NS; i++, runs++) {
        int ok = use_gnutls ? gnutls_load_once(path, dir, &times[i], &loaded)
                            : openssl_load_once(path, files, nfiles, &times[i], &loaded);
        if (!ok) return fail(use_gnutls ? "gnutls_x509_trust_list_add_trust_* failed" : "X509_STORE_load_locations failed");
        spent += times[i];
    }
    if (runs < iters)
        printf("ok %lld %d (median of %d runs: %d runs took over %d s)\n", median(times, runs), loaded, runs, runs,
               (int)(RUN_BUDGET_NS / 1000000000LL));
    else
        printf("ok %lld %d\n", median(times, runs), loaded);
    return 0;
}

static X509 *read_der_cert(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    X509 *x = d2i_X509_fp(f, NULL);
    fclose(f);
    return x;
}

static unsigned char *read_file(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)*len);
    if (fread(buf, 1, (size_t)*len, f) != (size_t)*len) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    return buf;
}

/* Cold path validation: the trust store (root + CRLs) is prepared once, as a
 * service would; each iteration parses the leaf and intermediate from DER and
 * runs X509_verify_cert with CRL checking of the whole chain. */
static int cmd_verify(char **argv) {
    const char *root_path = argv[0], *int_path = argv[1], *leaf_path = argv[2], *crl_path = argv[3];
    time_t at = (time_t)atoll(argv[4]);
    int iters = atoi(argv[5]);

    X509_STORE *store = X509_STORE_new();
    if (!X509_STORE_load_locations(store, root_path, NULL)) return fail("cannot load root");
    X509_LOOKUP *lookup = X509_STORE_add_lookup(store, X509_LOOKUP_file());
    if (X509_load_crl_file(lookup, crl_path, X509_FILETYPE_PEM) <= 0) return fail("cannot load CRLs");
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL);

    long int_len, leaf_len;
    unsigned char *int_der = read_file(int_path, &int_len);
    unsigned char *leaf_der = read_file(leaf_path, &leaf_len);
    if (!int_der || !leaf_der) return fail("cannot read chain");
    X509 *probe = read_der_cert(leaf_path);
    if (!probe) return fail("leaf is not a DER certificate");
    X509_free(probe);

    long long *times = calloc((size_t)iters, sizeof *times);
    int last = 0;
    for (int i = 0; i < iters; i++) {
        long long t0 = now_ns();
        const unsigned char *p = int_der;
        X509 *inter = d2i_X509(NULL, &p, int_len);
        p = leaf_der;
        X509 *leaf = d2i_X509(NULL, &p, leaf_len);
        STACK_OF(X509) *untrusted = sk_X509_new_null();
        sk_X509_push(untrusted, inter);
        X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        X509_STORE_CTX_init(ctx, store, leaf, untrusted);
        X509_STORE_CTX_set_time(ctx, 0, at);
        int ok = X509_verify_cert(ctx);
        last = ok == 1 ? 0 : X509_STORE_CTX_get_error(ctx);
        X509_STORE_CTX_free(ctx);
        sk_X509_pop_free(untrusted, X509_free);
        X509_free(leaf);
        times[i] = now_ns() - t0;
        if (ok != 1) {
            printf("error X509_verify_cert: %s\n", X509_verify_cert_error_string(last));
            return 1;
        }
    }
    printf("ok %lld %d\n", median(times, iters), last);
    X509_STORE_free(store);
    return 0;
}

static STACK_OF(X509) *read_pem_certs(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    STACK_OF(X509) *out = sk_X509_new_null();
    X509 *x;
    while ((x = PEM_read_X509(f, NULL, NULL, NULL)) != NULL) sk_X509_push(out, x);
    ERR_clear_error();
    fclose(f);
    return out;
}

static int cmd_verify_pool(char **argv) {
    const char *anchor_path = argv[0], *pool_path = argv[1], *crl_path = argv[2], *leaf_path = argv[3];
    time_t at = (time_t)atoll(argv[4]);
    const char *policy = argv[5];
    int iters = atoi(argv[6]);

    X509_STORE *store = X509_STORE_new();
    if (!X509_STORE_load_locations(store, anchor_path, NULL)) return fail("cannot load anchor");
    X509_LOOKUP *lookup = X509_STORE_add_lookup(store, X509_LOOKUP_file());
    if (X509_load_crl_file(lookup, crl_path, X509_FILETYPE_PEM) <= 0) return fail("cannot load CRLs");
    STACK_OF(X509) *pool = read_pem_certs(pool_path);
    if (!pool || sk_X509_num(pool) == 0) return fail("cannot read the pool");
    long leaf_len;
    unsigned char *leaf_pem = read_file(leaf_path, &leaf_len);
    if (!leaf_pem) return fail("cannot read leaf");
    ASN1_OBJECT *oid = OBJ_txt2obj(policy, 1);
    if (!oid) return fail("bad policy OID");

    long long *times = calloc((size_t)iters, sizeof *times);
    int length = 0, runs = 0;
    long long total = 0;
    for (int i = 0; i < iters; i++) {
        long long t0 = now_ns();
        BIO *bio = BIO_new_mem_buf(leaf_pem, (int)leaf_len);
        X509 *leaf = PEM_read_bio_X509(bio, NULL, NULL, NULL);
        BIO_free(bio);
        if (!leaf) return fail("leaf is not a PEM certificate");
        X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        X509_STORE_CTX_init(ctx, store, leaf, pool);
        X509_VERIFY_PARAM *param = X509_STORE_CTX_get0_param(ctx);
        X509_VERIFY_PARAM_set_time(param, at);
        X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL |
                                               X509_V_FLAG_EXPLICIT_POLICY | X509_V_FLAG_POLICY_CHECK);
        X509_VERIFY_PARAM_add0_policy(param, OBJ_dup(oid));
        int ok = X509_verify_cert(ctx);
        int err = X509_STORE_CTX_get_error(ctx);
        if (ok == 1) length = sk_X509_num(X509_STORE_CTX_get0_chain(ctx));
        X509_STORE_CTX_free(ctx);
        X509_free(leaf);
        times[i] = now_ns() - t0;
        runs++;
        if (ok != 1) {
            printf("error X509_verify_cert: %s\n", X509_verify_cert_error_string(err));
            return 1;
        }
        total += times[i];
        if (total >= RUN_BUDGET_NS) break;
    }
    printf("ok %lld %d\n", median(times, runs), length);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "openssl-load") == 0) return cmd_load(0, argv[2], atoi(argv[3]));
    if (argc == 4 && strcmp(argv[1], "gnutls-load") == 0) return cmd_load(1, argv[2], atoi(argv[3]));
    if (argc == 8 && strcmp(argv[1], "openssl-verify") == 0) return cmd_verify(argv + 2);
    if (argc == 9 && strcmp(argv[1], "openssl-verify-pool") == 0) return cmd_verify_pool(argv + 2);
    fprintf(stderr, "usage: see the comment at the top of peers.c\n");
    return 2;
}
