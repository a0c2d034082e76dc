//! File access that treats every path as hostile: configuration and context files are read
//! without blocking, only when they are regular files, and never past a byte cap (`bounded`);
//! the folders gjc keeps its own records in are never symbolic links (`dirs`); in-process
//! writes stay beneath the session's writable roots whatever a path spells, with the kernel's
//! help (`beneath`); a whole file is replaced one way everywhere (`atomic`).

pub mod atomic;
pub mod beneath;
pub mod bounded;
pub mod dirs;
