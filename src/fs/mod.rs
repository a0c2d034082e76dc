//! File access that treats every path as hostile: configuration and context files are read
//! without blocking, only when they are regular files, and never past a byte cap (`bounded`);
//! the folders gjc keeps its own records in are never symbolic links (`dirs`).

pub mod bounded;
pub mod dirs;
