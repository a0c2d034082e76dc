//! The two I/O threads: `gjc-stdin` (read, decode, route) and `gjc-stdout` (frame, number, write).

mod lookahead;
pub mod render;
pub mod stdin;
pub mod stdout;
