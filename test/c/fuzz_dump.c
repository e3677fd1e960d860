/*
 * fuzz_dump.c -- feeds arbitrary bytes to the dump decoder and, when they
 * decode, to the grouping.  Built two ways:
 *   - with clang -fsanitize=fuzzer,address,undefined by `make fuzz'
 *     (libFuzzer supplies main);
 *   - with -DMF_FUZZ_REPLAY and ASan/UBSan by CMake, as `fuzz_replay FILE|DIR...',
 *     which runs every corpus file once (ctest's corpus replay).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "mf_dump.h"
#include "mf_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mf_dump d;
    char err[256];
    if (mf_dump_decode((const char *)data, size, &d, err, sizeof(err)) == 0) {
        mf_row *rows;
        size_t n;
        if (mf_group(&d, MF_BY_NAME, &rows, &n) == 0)
            mf_rows_free(rows);
        /* a version 6 dump's rows as given, and the table of them */
        mf_by by = MF_BY_PROCESS;
        if (d.version >= 6 && d.by && mf_by_parse(d.by, &by) == 0 &&
            mf_rows_given(&d, &rows, &n) == 0) {
            FILE *null = fopen("/dev/null", "w");
            mf_top_layout lay = {.by = by, .width = 80, .first = 0, .top = 20,
                                 .selected = -1, .peaks = 1, .ellipsis = "~",
                                 .total = mf_given_total(&d)};
            if (null) {
                mf_print_top(null, &d, rows, n, &lay);
                fclose(null);
            }
            mf_rows_free(rows);
        }
        mf_dump_free(&d);
    }
    return 0;
}

#ifdef MF_FUZZ_REPLAY
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "mf_file.h"

static int run_file(const char *path)
{
    size_t len;
    char *buf = mf_read_file(path, &len);
    if (!buf)
        return -1;
    LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "fuzz_replay: no %s\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            files += run_file(argv[i]) == 0;
            continue;
        }
        DIR *dh = opendir(argv[i]);
        struct dirent *de;
        while (dh && (de = readdir(dh)) != NULL) {
            char path[4096];
            if (de->d_name[0] == '.')
                continue;
            snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
            files += run_file(path) == 0;
        }
        if (dh)
            closedir(dh);
    }
    printf("fuzz_replay: %d inputs, no finding\n", files);
    return files > 0 ? 0 : 1;
}
#endif
