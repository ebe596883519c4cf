/* Range check of class / token indices before a kernel uses them as offsets. */
#include "cpu/kernels.h"

int64_t tfc_cpu_first_bad_index(const void *ids, tfc_dtype idt, int64_t n, int64_t limit, int skip_ignore,
                                int64_t ignore_index) {
    for (int64_t i = 0; i < n; i++) {
        int64_t id = tfc_index_at(ids, idt, i);
        if (skip_ignore && id == ignore_index) continue;
        if (id < 0 || id >= limit) return i;
    }
    return -1;
}
