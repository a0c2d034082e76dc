//! Bash command classification for the unattended control plane: what the worst thing a shell
//! command line could do is, as an action class.
//!
//! Fail-closed by construction: a command this module does not positively know to be read-only
//! is at least `bash.mutating`; the result over a command line is the most severe class of every
//! statement and of every nested `$(…)`, `` `…` ``, `<(…)` and `>(…)` body. Malformed input
//! (an unterminated quote or substitution) is never read-only.

use std::fmt;

/// The action classes a declaration may allow: one `command.<scope>` per command scope, then the
/// classes of shell commands and tool side effects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActionClass {
    CommandPrompt,
    CommandSession,
    CommandMessageRead,
    CommandControl,
    CommandModel,
    CommandBash,
    CommandExport,
    CommandHostTools,
    CommandHostUri,
    CommandAdmin,
    BashReadonly,
    BashMutating,
    FileWrite,
    FileDelete,
    GitForcePush,
    BashDestructive,
    HostToolInvoke,
    HostUriRead,
    HostUriWrite,
    AuthLogin,
    /// Commands may use the network in the sandbox (an unattended declaration's grant).
    NetworkAccess,
}

impl ActionClass {
    pub const ALL: [ActionClass; 21] = [
        ActionClass::CommandPrompt,
        ActionClass::CommandSession,
        ActionClass::CommandMessageRead,
        ActionClass::CommandControl,
        ActionClass::CommandModel,
        ActionClass::CommandBash,
        ActionClass::CommandExport,
        ActionClass::CommandHostTools,
        ActionClass::CommandHostUri,
        ActionClass::CommandAdmin,
        ActionClass::BashReadonly,
        ActionClass::BashMutating,
        ActionClass::FileWrite,
        ActionClass::FileDelete,
        ActionClass::GitForcePush,
        ActionClass::BashDestructive,
        ActionClass::HostToolInvoke,
        ActionClass::HostUriRead,
        ActionClass::HostUriWrite,
        ActionClass::AuthLogin,
        ActionClass::NetworkAccess,
    ];

    /// The wire name, as declared in `action_allowlist`.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionClass::CommandPrompt => "command.prompt",
            ActionClass::CommandSession => "command.session",
            ActionClass::CommandMessageRead => "command.message_read",
            ActionClass::CommandControl => "command.control",
            ActionClass::CommandModel => "command.model",
            ActionClass::CommandBash => "command.bash",
            ActionClass::CommandExport => "command.export",
            ActionClass::CommandHostTools => "command.host_tools",
            ActionClass::CommandHostUri => "command.host_uri",
            ActionClass::CommandAdmin => "command.admin",
            ActionClass::BashReadonly => "bash.readonly",
            ActionClass::BashMutating => "bash.mutating",
            ActionClass::FileWrite => "file.write",
            ActionClass::FileDelete => "file.delete",
            ActionClass::GitForcePush => "git.force_push",
            ActionClass::BashDestructive => "bash.destructive",
            ActionClass::HostToolInvoke => "host_tool.invoke",
            ActionClass::HostUriRead => "host_uri.read",
            ActionClass::HostUriWrite => "host_uri.write",
            ActionClass::AuthLogin => "auth.login",
            ActionClass::NetworkAccess => "network.access",
        }
    }

    /// Whether the class is one of writing or deleting files.
    pub fn changes_files(self) -> bool {
        matches!(
            self,
            ActionClass::BashMutating
                | ActionClass::BashDestructive
                | ActionClass::FileWrite
                | ActionClass::FileDelete
                | ActionClass::GitForcePush
        )
    }

    pub fn parse(name: &str) -> Option<ActionClass> {
        ActionClass::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// Severity among the classes a shell command can have; `None` for the others.
    /// Order: readonly < mutating < file.write < file.delete < git.force_push < destructive.
    pub fn bash_severity(self) -> Option<u8> {
        Some(match self {
            ActionClass::BashReadonly => 0,
            ActionClass::BashMutating => 1,
            ActionClass::FileWrite => 2,
            ActionClass::FileDelete => 3,
            ActionClass::GitForcePush => 4,
            ActionClass::BashDestructive => 5,
            _ => return None,
        })
    }

    /// The more severe of two shell classes.
    fn max(self, other: ActionClass) -> ActionClass {
        if other.bash_severity() > self.bash_severity() {
            other
        } else {
            self
        }
    }
}

impl fmt::Display for ActionClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The action class of a shell command line: the most severe class over all its statements and
/// nested substitutions. Always one of the six shell classes.
pub fn classify_bash(command: &str) -> ActionClass {
    classify_depth(command, 0)
}

/// Whether `command` is positively known to change nothing.
pub fn is_read_only(command: &str) -> bool {
    classify_bash(command) == ActionClass::BashReadonly
}

use ActionClass::{
    BashDestructive as Destructive, BashMutating as Mutating, BashReadonly as Readonly, FileWrite,
};

/// Nesting deeper than this is not analysed: such a command is called mutating at least.
const MAX_DEPTH: usize = 16;

/// A command line longer than this is not analysed (the lexer holds it as characters, and
/// substitution bodies again per level): it gets the most severe class.
const MAX_COMMAND_BYTES: usize = 256 * 1024;

fn classify_depth(command: &str, depth: usize) -> ActionClass {
    if depth > MAX_DEPTH {
        return Mutating;
    }
    if command.len() > MAX_COMMAND_BYTES {
        return Destructive;
    }
    let lexed = lex(command);
    let mut class = if lexed.malformed { Mutating } else { Readonly };
    if is_fork_bomb(command) {
        class = Destructive;
    }
    for body in &lexed.nested {
        class = class.max(classify_depth(body, depth + 1));
    }
    for statement in &lexed.statements {
        class = class.max(classify_statement(statement, depth));
    }
    class
}

/// `:(){ :|:& };:` and its renamings: a function whose body pipes to itself in the background.
fn is_fork_bomb(command: &str) -> bool {
    let squeezed: String = command.chars().filter(|c| !c.is_whitespace()).collect();
    squeezed.contains("(){") && squeezed.contains('|') && squeezed.contains('&')
}

use super::lex::{lex, Token, Word};

/// Writing to these is not writing a file.
const HARMLESS_SINKS: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"];

fn classify_statement(tokens: &[Token], depth: usize) -> ActionClass {
    let mut class = Readonly;
    let mut owned: Vec<Word> = Vec::new();
    let mut iter = tokens.iter();
    while let Some(token) = iter.next() {
        match token {
            Token::Word(w) => {
                if !expand_braces(w, &mut owned) {
                    class = class.max(Mutating);
                }
            }
            Token::RedirIn => {
                if iter.next().is_none() {
                    class = class.max(Mutating);
                }
            }
            Token::RedirOut { dup } => class = class.max(redirect_class(*dup, iter.next())),
        }
    }
    let words: Vec<&Word> = owned.iter().collect();
    class.max(classify_words(&words, depth))
}

/// At most this many words come out of one word's brace expansion; the rest are dropped and the
/// statement is called mutating at least.
const MAX_BRACE_WORDS: usize = 64;

/// `{rm,-rf,x}` is three words to the shell, `r{m,}` two: expanded here so that a command or an
/// option hidden in braces is seen. Quoted braces are expanded too (they are literal to the
/// shell), which can only make a class more severe, never less.
/// `false` when the expansion was cut short.
fn expand_braces(w: &Word, out: &mut Vec<Word>) -> bool {
    let mut complete = true;
    let mut pending = vec![w.text.clone()];
    let mut produced = 0;
    while let Some(text) = pending.pop() {
        match brace_group(&text) {
            Some((prefix, alternatives, suffix)) if produced < MAX_BRACE_WORDS => {
                produced += alternatives.len();
                for alt in alternatives.iter().rev() {
                    pending.push(format!("{prefix}{alt}{suffix}"));
                }
            }
            Some(_) => {
                // Too many: an unknown word takes their place.
                complete = false;
                out.push(Word {
                    text: "{".into(),
                    expands: true,
                });
            }
            None => out.push(Word {
                text,
                expands: w.expands,
            }),
        }
    }
    complete
}

/// The first `{a,b,…}` group of a word (not `${…}`): prefix, alternatives, suffix.
fn brace_group(text: &str) -> Option<(&str, Vec<&str>, &str)> {
    let bytes = text.as_bytes();
    let mut start = None;
    let mut depth = 0;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'{' if i == 0 || bytes[i - 1] != b'$' => {
                if depth == 0 {
                    start = Some(i);
                }
                depth += 1;
            }
            b'}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    let open = start?;
                    let inner = &text[open + 1..i];
                    let parts = split_top_level(inner);
                    if parts.len() > 1 {
                        return Some((&text[..open], parts, &text[i + 1..]));
                    }
                }
            }
            _ => {}
        }
    }
    None
}

fn split_top_level(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut from) = (0, 0);
    for (i, b) in inner.bytes().enumerate() {
        match b {
            b'{' => depth += 1,
            b'}' => depth -= 1,
            b',' if depth == 0 => {
                parts.push(&inner[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[from..]);
    parts
}

fn redirect_class(dup: bool, target: Option<&Token>) -> ActionClass {
    let Some(Token::Word(w)) = target else {
        return Mutating;
    };
    if w.expands {
        return FileWrite;
    }
    let fd_copy =
        !w.text.is_empty() && (w.text == "-" || w.text.chars().all(|c| c.is_ascii_digit()));
    if (dup && fd_copy) || HARMLESS_SINKS.contains(&w.text.as_str()) {
        Readonly
    } else {
        FileWrite
    }
}

/// Shell words that open or close a compound command; the command follows them.
const KEYWORDS: &str = "\
    ! { } if then else elif fi do done while until esac coproc";

/// Commands that run the rest of the line as a command.
const WRAPPERS: &str = "\
    sudo env command nice nohup doas time timeout stdbuf setsid ionice exec";

/// Commands known to change nothing (with the argument checks in `classify_command`).
const READ_ONLY: &str = "\
    ls cat pwd echo printf grep egrep fgrep rg head tail wc stat file which type date whoami \
    true false test [ [[ diff sort uniq cut basename dirname realpath cmp column tr find du \
    df uname id seq sleep : cd pushd popd tee set exit return wait read printenv nl readlink \
    md5sum sha1sum sha256sum";

/// Whether `word` is one of the space-separated names in `list`.
fn listed(list: &str, word: &str) -> bool {
    list.split_whitespace().any(|n| n == word)
}

fn classify_words(words: &[&Word], depth: usize) -> ActionClass {
    let mut class = Readonly;
    let mut i = 0;
    while i < words.len() && listed(KEYWORDS, &words[i].text) && !words[i].expands {
        i += 1;
    }
    let Some(first) = words.get(i) else {
        return class;
    };
    match first.text.as_str() {
        // `for x in …` / `case x in` / `select`: the words are data; bodies are other statements.
        "for" | "case" | "select" if !first.expands => return class,
        "export" | "declare" | "typeset" | "local" | "readonly" if !first.expands => {
            let risky = words[i + 1..].iter().any(|w| assignment_is_risky(&w.text));
            return if risky { Mutating } else { Readonly };
        }
        _ => {}
    }
    // Leading assignments, then wrappers with their options, assignments and arguments.
    loop {
        while let Some(w) = words.get(i) {
            match assignment_name(w) {
                Some(_) if assignment_is_risky(&w.text) => class = class.max(Mutating),
                Some(_) => {}
                None => break,
            }
            i += 1;
        }
        let Some(w) = words.get(i) else {
            return class;
        };
        let (name, trusted) = command_name(&w.text);
        if w.expands || !trusted || !listed(WRAPPERS, name) {
            break;
        }
        match skip_wrapper(name, &words[i + 1..]) {
            WrapperRest::Skip(n) => i += 1 + n,
            WrapperRest::Eval(text) => return class.max(classify_depth(&text, depth + 1)),
            WrapperRest::Opaque => return class.max(Mutating),
        }
    }
    class.max(classify_command(&words[i..], depth))
}

/// `NAME=value`, `NAME+=value`, `NAME[i]=value`: the name, when the word is an assignment.
fn assignment_name(w: &Word) -> Option<&str> {
    let eq = w.text.find('=')?;
    let name = w.text[..eq].trim_end_matches('+');
    let name = name.split('[').next().unwrap_or(name);
    let mut chars = name.chars();
    let ok = matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
    ok.then_some(name)
}

/// Variables through which an assignment alone makes a following "read-only" command run other
/// code (a changed `PATH`, a preloaded library, a pager or editor hook, a git or ripgrep config).
fn assignment_is_risky(text: &str) -> bool {
    let name = text.split(['=', '+', '[']).next().unwrap_or(text);
    matches!(
        name,
        "PATH"
            | "BASH_ENV"
            | "ENV"
            | "IFS"
            | "PROMPT_COMMAND"
            | "SHELLOPTS"
            | "BASHOPTS"
            | "PS4"
            | "PAGER"
            | "MANPAGER"
            | "EDITOR"
            | "VISUAL"
            | "RIPGREP_CONFIG_PATH"
            | "CDPATH"
    ) || name.starts_with("LD_")
        || name.starts_with("DYLD_")
        || name.starts_with("GIT_")
        || name.ends_with("_PAGER")
}

/// The command's own name (the last path component) and whether it is the system's command of
/// that name: a bare name, or a path in one of the system's binary directories. `./ls` is
/// named `ls` but is whatever the project put there.
fn command_name(text: &str) -> (&str, bool) {
    const SYSTEM: &[&str] = &[
        "/bin/",
        "/usr/bin/",
        "/usr/local/bin/",
        "/sbin/",
        "/usr/sbin/",
    ];
    let Some(slash) = text.rfind('/') else {
        return (text, true);
    };
    let base = &text[slash + 1..];
    let trusted = SYSTEM
        .iter()
        .any(|dir| text.strip_prefix(dir) == Some(base));
    (base, trusted)
}

enum WrapperRest {
    /// This many words after the wrapper are its own; the command follows.
    Skip(usize),
    /// The wrapper runs a string as a command line (`env -S`).
    Eval(String),
    /// The wrapper's arguments cannot be told apart from the command's.
    Opaque,
}

/// The options of a wrapper that take a separate argument.
fn wrapper_arg_options(wrapper: &str) -> &'static [&'static str] {
    match wrapper {
        "sudo" => &[
            "-u", "-g", "-h", "-p", "-C", "-D", "-U", "-r", "-t", "-T", "--user", "--group",
        ],
        "doas" => &["-u", "-C"],
        "env" => &["-u", "-C", "--unset", "--chdir"],
        "nice" => &["-n", "--adjustment"],
        "ionice" => &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
        "timeout" => &["-s", "-k", "--signal", "--kill-after"],
        "stdbuf" => &["-i", "-o", "-e", "--input", "--output", "--error"],
        "exec" => &["-a"],
        _ => &[],
    }
}

fn skip_wrapper(wrapper: &str, rest: &[&Word]) -> WrapperRest {
    let takes_arg = wrapper_arg_options(wrapper);
    let mut n = 0;
    while let Some(w) = rest.get(n) {
        let t = w.text.as_str();
        if w.expands && t.starts_with('$') {
            return WrapperRest::Opaque;
        }
        if wrapper == "env" && (t == "-S" || t.starts_with("--split-string")) {
            let joined = if let Some(v) = t.strip_prefix("--split-string=") {
                std::iter::once(v.to_string())
                    .chain(rest[n + 1..].iter().map(|w| w.text.clone()))
                    .collect::<Vec<_>>()
                    .join(" ")
            } else {
                rest[n + 1..]
                    .iter()
                    .map(|w| w.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            return WrapperRest::Eval(joined);
        }
        if t == "--" {
            n += 1;
            break;
        }
        if t.starts_with('-') && t.len() > 1 {
            n += if takes_arg.contains(&t) { 2 } else { 1 };
            continue;
        }
        if wrapper == "env" && assignment_name(w).is_some() {
            if assignment_is_risky(t) {
                return WrapperRest::Opaque;
            }
            n += 1;
            continue;
        }
        break;
    }
    // `timeout` takes its duration before the command.
    if wrapper == "timeout" && rest.get(n).is_some() {
        n += 1;
    }
    // Without a command, `sudo -s` / `sudo -i` / `doas -s` start a shell that reads its input.
    if matches!(wrapper, "sudo" | "doas") && rest.get(n).is_none() {
        return WrapperRest::Opaque;
    }
    WrapperRest::Skip(n)
}

/// One command with its arguments (wrappers and assignments already removed).
fn classify_command(words: &[&Word], depth: usize) -> ActionClass {
    let Some(head) = words.first() else {
        return Readonly;
    };
    if head.expands {
        return Mutating;
    }
    let (name, trusted) = command_name(&head.text);
    let class = classify_named(name, &words[1..], depth);
    if trusted {
        class
    } else {
        // Not the system's command: at least unknown, and no milder than its name says.
        class.max(Mutating)
    }
}

mod commands;
use commands::classify_named;

#[cfg(test)]
mod tests;
