/* Test-only: alters stored values in a STOPPED node's data file in place, without the log —
 * what a flipped disk sector or a bad copy does. Every value of the `tree` table that contains
 * NEEDLE gets REPLACEMENT (same length) over it. Prints how many values it changed; exits 1 when
 * none contained NEEDLE.
 *
 *   lmdb_alter DATA_DIR NEEDLE REPLACEMENT
 */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int rc, const char *what) {
    if (rc != 0) {
        fprintf(stderr, "lmdb_alter: %s: %s\n", what, mdb_strerror(rc));
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc != 4 || strlen(argv[2]) != strlen(argv[3]) || strlen(argv[2]) == 0) {
        fprintf(stderr, "usage: lmdb_alter DATA_DIR NEEDLE REPLACEMENT (same length)\n");
        return 2;
    }
    const char *needle = argv[2], *replacement = argv[3];
    size_t n = strlen(needle);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_cursor *cur;
    MDB_val k, v;
    check(mdb_env_create(&env), "env_create");
    check(mdb_env_set_maxdbs(env, 16), "set_maxdbs");
    check(mdb_env_set_mapsize(env, (size_t)1 << 36), "set_mapsize");
    check(mdb_env_open(env, argv[1], 0, 0644), "env_open");
    check(mdb_txn_begin(env, NULL, 0, &txn), "txn_begin");
    check(mdb_dbi_open(txn, "tree", 0, &dbi), "dbi_open tree");
    check(mdb_cursor_open(txn, dbi, &cur), "cursor_open");
    int changed = 0;
    for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (v.mv_size < n) continue;
        unsigned char *copy = malloc(v.mv_size);
        memcpy(copy, v.mv_data, v.mv_size);
        int hit = 0;
        for (size_t i = 0; i + n <= v.mv_size; i++) {
            if (memcmp(copy + i, needle, n) == 0) { memcpy(copy + i, replacement, n); hit = 1; }
        }
        if (hit) {
            MDB_val nv = {v.mv_size, copy};
            check(mdb_cursor_put(cur, &k, &nv, MDB_CURRENT), "cursor_put");
            changed++;
        }
        free(copy);
    }
    mdb_cursor_close(cur);
    check(mdb_txn_commit(txn), "txn_commit");
    mdb_env_close(env);
    printf("%d\n", changed);
    return changed > 0 ? 0 : 1;
}
