//! What the `gjc` binary does from start to exit, as a library function so that a program
//! embedding gjc (an example that re-executes itself as the agent) runs exactly the same steps.

use clap::Parser;

/// Parses the command line, sets up logging on stderr and runs the front end `--mode` chooses.
/// Returns the exit code: 0 after a clean shutdown, 2 for a bad command line, 101 when a role
/// thread crashed.
pub fn main() -> i32 {
    // Taken before anything else: a parent that dies during start-up is still noticed.
    let parent = crate::app::Parent::current();
    // Before any other thread exists, so every one of them inherits it.
    crate::sched::batch_own_threads();
    crate::memory::limit_arenas();
    let args = crate::cli::Args::parse();
    if let Some(name) = &args.print_schema {
        return print_schema(name);
    }
    // Logs never touch stdout, which carries only protocol frames. The HTTP stack's wire dumps
    // (keys and headers in hex) stay off whatever RUST_LOG says.
    let logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
            .target(env_logger::Target::Stderr)
            .build();
    let max_level = logger.filter();
    if let Err(e) = crate::provider::logging::install(logger, max_level) {
        eprintln!("gjc: cannot set up logging: {e}");
    }
    let args = match args.validate() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("gjc: {e}");
            return 2;
        }
    };
    // The environment is read once, here; `--no-todo-reminders` overrides its setting.
    let mut settings = crate::settings::Settings::from_env();
    if args.no_todo_reminders {
        settings.todo_reminders = 0;
    }
    crate::app::run(args, settings, parent)
}

/// `--print-schema[=NAME]`: the schemas are generated from the protocol types, here and now.
fn print_schema(name: &str) -> i32 {
    use std::io::Write;
    let schema = match name {
        "all" => crate::protocol::schema::bundle(),
        one => match crate::protocol::schema::by_name(one) {
            Some(schema) => schema,
            None => unreachable!("clap accepts only the listed names"),
        },
    };
    let text = crate::protocol::schema::render(&schema);
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("gjc: cannot write the schema: {e}");
            1
        }
    }
}
