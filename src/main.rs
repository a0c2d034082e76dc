//! The `gjc` binary: parse the command line, set up logging on stderr, run RPC mode.

use clap::Parser;

fn main() {
    limit_malloc_arenas();
    let args = gjc::cli::Args::parse();
    // Logs never touch stdout, which carries only protocol frames.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .target(env_logger::Target::Stderr)
        .init();
    if let Err(e) = args.validate() {
        eprintln!("gjc: {e}");
        std::process::exit(2);
    }
    std::process::exit(gjc::app::run(args));
}

/// glibc gives every thread that allocates its own arena; gjc's threads move small messages, so
/// two arenas serve them and keep the idle resident set small.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}
