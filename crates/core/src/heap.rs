//! The C heap's settings for phantom's allocation pattern: values of megabytes each, made and dropped thousands of
//! times a run by several threads. With glibc's defaults each thread's arena keeps its own free memory (the noise
//! run's thread, the GEMM's workers), large blocks go back to the kernel on every free and come back as fresh pages
//! the kernel zeroes (a third of a run's CPU time on this machine's virtual memory). [`tune`] keeps them in one heap
//! instead. `GLIBC_TUNABLES` naming any `glibc.malloc` setting leaves the heap as the user set it. Blocks of 32 MiB
//! or more (a 1024² model's activations are hundreds) ask for transparent huge pages ([`Allocator`]): IS-Net 1024²
//! `--precision fp16` took 83.0 s (43.8 s in the kernel) instead of 88.6 s (49.1 s), peak 2.22 instead of 2.13 GB.

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

/// Blocks from this size up are backed by transparent huge pages where the kernel offers them on request
/// (`madvise` mode): one fault and one zeroing per 2 MiB instead of per 4 KiB.
const HUGE: usize = 32 << 20;

/// The system allocator, asking for huge pages on blocks of [`HUGE`] bytes or more (glibc maps those on their own).
pub struct Allocator;

// SAFETY: every call is the system allocator's; `advise` only gives the kernel a hint about pages of the block.
unsafe impl std::alloc::GlobalAlloc for Allocator {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        advise(std::alloc::System.alloc(l), l.size())
    }
    unsafe fn alloc_zeroed(&self, l: std::alloc::Layout) -> *mut u8 {
        advise(std::alloc::System.alloc_zeroed(l), l.size())
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        std::alloc::System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, size: usize) -> *mut u8 {
        advise(std::alloc::System.realloc(p, l, size), size)
    }
}

/// Asks for huge pages on the whole 2 MiB pages inside a block of `len` bytes at `p` (none below [`HUGE`]).
fn advise(p: *mut u8, len: usize) -> *mut u8 {
    #[cfg(target_os = "linux")]
    if len >= HUGE && !p.is_null() {
        const PAGE: usize = 2 << 20;
        let start = (p as usize).next_multiple_of(PAGE);
        let end = (p as usize + len) / PAGE * PAGE;
        if end > start {
            // SAFETY: the range lies inside the block just allocated; MADV_HUGEPAGE changes no content.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{GlobalAlloc, Layout};

    /// Kilobytes of huge pages backing the mapping that holds `p` (`/proc/self/smaps`).
    fn huge_kb_at(p: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split(' ').next().unwrap_or_default();
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = a <= p && p < b;
                    continue;
                }
            }
            if let (true, Some(kb)) = (inside, line.strip_prefix("AnonHugePages:")) {
                return kb.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
            }
        }
        0
    }

    /// A large block is usable whole and, where the kernel offers huge pages on request, backed by them once
    /// written; a small one is left alone.
    #[test]
    fn large_blocks_ask_for_huge_pages() {
        let l = Layout::from_size_align(HUGE * 2, 64).unwrap();
        // SAFETY: a non-zero layout; the block is written within its size, then freed with the same layout.
        unsafe {
            let p = Allocator.alloc(l);
            assert!(!p.is_null());
            std::ptr::write_bytes(p, 7, l.size());
            assert_eq!(*p.add(l.size() - 1), 7);
            let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
            if thp.is_ok_and(|t| t.contains("[madvise]") || t.contains("[always]")) {
                assert!(
                    huge_kb_at(p as usize + HUGE) > 0,
                    "no huge page in a block of {} bytes",
                    l.size()
                );
            }
            Allocator.dealloc(p, l);
        }
        assert_eq!(advise(std::ptr::null_mut(), HUGE), std::ptr::null_mut());
    }
}
