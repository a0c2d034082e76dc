//! The `gjc` binary: parse the command line, set up logging on stderr, run RPC mode.

fn main() {
    // In an editor's terminal gjc is the sandbox launcher (docs/sandbox.md), before anything else.
    if let Some(code) = gjc::sandbox::launcher::run_if_asked() {
        std::process::exit(code);
    }
    std::process::exit(gjc::entry::main());
}
