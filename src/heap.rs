//! The C heap's settings for phantom's allocation pattern: values of megabytes each, made and dropped thousands of
//! times a run by several threads. With glibc's defaults each thread's arena keeps its own free memory (the noise
//! run's thread, the GEMM's workers), large blocks go back to the kernel on every free and come back as fresh pages
//! the kernel zeroes (a third of a run's CPU time on this machine's virtual memory). [`tune`] keeps them in one heap
//! instead. `GLIBC_TUNABLES` naming any `glibc.malloc` setting leaves the heap as the user set it.

/// The size from which glibc maps a block of its own (its most, 32 MiB, instead of the adaptive default).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: i32 = 32 << 20;
/// Free memory at the heap's top returned to the kernel only beyond this.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: i32 = 512 << 20;

/// Sets one arena for every thread, large blocks from the heap and free memory kept for reuse; before any thread
/// starts. Measured (2 cores, release, interleaved runs): ResNet-18 comparison 0.81–0.97 s and 389–506 MB peak
/// before, 0.66–0.77 s and 358–401 MB after; PP-OCRv4 det 640² 3.1–3.2 s before, 2.6–2.9 s after.
pub fn tune() {
    let user_set = std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc"));
    if user_set {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}

/// Hands the heap's free pages back to the kernel (glibc's `malloc_trim`), between stages that free much: the
/// holes they leave would otherwise stay resident until reused. The pages come back zeroed when next used.
pub fn release() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}
