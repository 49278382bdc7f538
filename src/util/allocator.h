#pragma once
// Process-wide memory allocator settings for training.
namespace trainbench {

// Makes glibc malloc keep freed memory for reuse instead of returning it to the kernel. A training step
// frees and re-allocates the same large activation buffers every iteration; by default glibc serves
// each of them with a fresh mmap, so every step page-faults and zeroes gigabytes again. Measured on
// ResNet-50 at 224 px, batch 32, 2 threads (docs/performance-history.md): 4.0 -> 6.1 img/s, minor page faults
// 8.4 M -> 1.2 M. The cost is that the process keeps its peak memory until it exits. Call first thing in
// main(), before other threads start. No effect with other C libraries.
void keep_freed_memory_for_reuse();

}  // namespace trainbench
