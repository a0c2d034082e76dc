//! The `gjc` binary: the sandbox launcher when asked, else parse the command line, set up logging
//! on stderr and run the front end `--mode` chooses (RPC or ACP).

use std::process::ExitCode;

fn main() -> ExitCode {
    // In an editor's terminal gjc is the sandbox launcher (docs/sandbox.md), before anything else.
    let code = match gjc::sandbox::launcher::run_if_asked() {
        Some(code) => code,
        None => gjc::entry::main(),
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
