//! The `gjc` binary: parse the command line, set up logging on stderr, run RPC mode.

fn main() {
    std::process::exit(gjc::entry::main());
}
