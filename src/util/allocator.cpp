#include "util/allocator.h"

#include <cstddef>  // defines __GLIBC__ on glibc systems

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace trainbench {

void keep_freed_memory_for_reuse() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_MAX, 0);             // large blocks from the heap, where they are reused ...
  mallopt(M_TRIM_THRESHOLD, 1 << 30);  // ... and free memory at its top is not handed back early
#endif
}

}  // namespace trainbench
