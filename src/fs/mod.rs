//! File system access with the kernel's help: `beneath` keeps in-process writes under the
//! session's writable roots whatever a path spells.

pub mod beneath;
