//! The `gjc` binary: parse the command line, set up logging on stderr, run RPC mode.

use std::process::ExitCode;

fn main() -> ExitCode {
    // In an editor's terminal gjc is the sandbox launcher (docs/sandbox.md), before anything else.
    let code = match gjc::sandbox::launcher::run_if_asked() {
        Some(code) => code,
        None => gjc::entry::main(),
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
