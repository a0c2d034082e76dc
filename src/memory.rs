//! glibc allocator tuning. gjc's threads pass small messages, and a few commands (loading a long
//! session, `get_messages`, `export_html`) allocate megabytes that are freed right after; glibc
//! keeps such memory in its arenas unless asked to give it back.

/// Two arenas serve gjc's threads: every thread that allocates would otherwise get its own, and
/// each costs resident pages at idle. Call before any other thread exists.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Returns free pages of every arena to the system, after a command whose transient allocations
/// would otherwise stay resident until the next large one.
pub fn release_free_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory the allocator holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}
