//! The `gjc` binary: parse the command line, set up logging on stderr, run RPC mode.

use clap::Parser;

fn main() {
    // Taken before anything else: a parent that dies during start-up is still noticed.
    let parent = gjc::app::Parent::current();
    gjc::memory::limit_arenas();
    let args = gjc::cli::Args::parse();
    if let Some(name) = &args.print_schema {
        std::process::exit(print_schema(name));
    }
    // Logs never touch stdout, which carries only protocol frames. The HTTP stack's wire dumps
    // (keys and headers in hex) stay off whatever RUST_LOG says.
    let logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
            .target(env_logger::Target::Stderr)
            .build();
    let max_level = logger.filter();
    if let Err(e) = gjc::provider::logging::install(logger, max_level) {
        eprintln!("gjc: cannot set up logging: {e}");
    }
    let args = match args.validate() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("gjc: {e}");
            std::process::exit(2);
        }
    };
    std::process::exit(gjc::app::run(args, parent));
}

/// `--print-schema[=NAME]`: the schemas are generated from the protocol types, here and now.
fn print_schema(name: &str) -> i32 {
    use std::io::Write;
    let schema = match name {
        "all" => gjc::protocol::schema::bundle(),
        one => match gjc::protocol::schema::by_name(one) {
            Some(schema) => schema,
            None => unreachable!("clap accepts only the listed names"),
        },
    };
    let text = gjc::protocol::schema::render(&schema);
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("gjc: cannot write the schema: {e}");
            1
        }
    }
}
