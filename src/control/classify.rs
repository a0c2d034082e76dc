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
    /// A call of an MCP server's tool.
    McpToolInvoke,
    HostUriRead,
    HostUriWrite,
    AuthLogin,
    /// Commands may use the network in the sandbox (an unattended declaration's grant).
    NetworkAccess,
}

impl ActionClass {
    pub const ALL: [ActionClass; 22] = [
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
        ActionClass::McpToolInvoke,
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
            ActionClass::McpToolInvoke => "mcp_tool.invoke",
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
    BashDestructive as Destructive, BashMutating as Mutating, BashReadonly as Readonly, FileDelete,
    FileWrite, GitForcePush,
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

fn classify_named(name: &str, args: &[&Word], depth: usize) -> ActionClass {
    match name {
        "rm" | "unlink" | "rmdir" => FileDelete,
        "dd" | "shred" | "mke2fs" | "mkswap" | "wipefs" | "fdisk" | "sfdisk" | "parted" => {
            Destructive
        }
        n if n.starts_with("mkfs") => Destructive,
        "git" => classify_git(args),
        "find" => classify_find(args, depth),
        "xargs" => classify_xargs(args, depth),
        "sed" => classify_sed(args),
        "sort" => classify_sort(args),
        "uniq" => classify_uniq(args),
        "date" => classify_date(args),
        // `--pre` and `--hostname-bin` name programs ripgrep runs.
        "rg" if args
            .iter()
            .any(|a| a.text.starts_with("--pre") || a.text.starts_with("--hostname-bin")) =>
        {
            Mutating
        }
        // `file -C` compiles a magic file next to the source.
        "file"
            if args
                .iter()
                .any(|a| a.text == "--compile" || short_cluster_has(&a.text, 'C')) =>
        {
            FileWrite
        }
        "tee" => classify_tee(args),
        "sh" | "bash" | "zsh" | "dash" | "ksh" => classify_shell(args, depth),
        "eval" => {
            let text: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
            classify_depth(&text.join(" "), depth + 1)
        }
        n if listed(READ_ONLY, n) => Readonly,
        _ => Mutating,
    }
}

/// `sh -c STRING`: the string is the command line that runs. A script file or stdin is unknown.
fn classify_shell(args: &[&Word], depth: usize) -> ActionClass {
    let c_at = args
        .iter()
        .position(|a| a.text.starts_with('-') && !a.text.starts_with("--") && a.text.contains('c'));
    match c_at.and_then(|i| args.get(i + 1)) {
        Some(script) if !script.expands => classify_depth(&script.text, depth + 1),
        _ => Mutating,
    }
}

/// Whether a short-option cluster (`-abc`, not `--long`) contains `flag`.
fn short_cluster_has(text: &str, flag: char) -> bool {
    text.starts_with('-') && !text.starts_with("--") && text[1..].contains(flag)
}

fn classify_git(args: &[&Word]) -> ActionClass {
    let mut i = 0;
    let mut class = Readonly;
    // Global options; `-c` can name a pager, editor or hook that runs anything.
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if !t.starts_with('-') {
            break;
        }
        match t {
            "-C" | "--git-dir" | "--work-tree" | "--namespace" => i += 2,
            "-c" | "--config-env" | "--exec-path" => {
                class = class.max(Mutating);
                i += 2;
            }
            t if t.starts_with("--exec-path=") || t.starts_with("--config-env=") => {
                class = class.max(Mutating);
                i += 1;
            }
            _ => i += 1,
        }
    }
    let Some(sub) = args.get(i) else {
        return class;
    };
    if sub.expands {
        return Mutating;
    }
    let rest = &args[i + 1..];
    let has = |flags: &[&str]| rest.iter().any(|a| flags.contains(&a.text.as_str()));
    let sub_class = match sub.text.as_str() {
        "push" => classify_git_push(rest),
        "reset" if has(&["--hard"]) => Destructive,
        "clean"
            if rest
                .iter()
                .any(|a| a.text == "--force" || short_cluster_has(&a.text, 'f')) =>
        {
            Destructive
        }
        "rm" => FileDelete,
        "status" | "log" | "diff" | "show" | "rev-parse" | "ls-files" | "ls-remote" | "ls-tree"
        | "for-each-ref" | "describe" | "cat-file" | "blame" | "shortlog" | "whatchanged"
        | "grep" | "var" | "version" | "help" => {
            // `grep -O` opens the matches in a pager of the caller's choosing.
            let runs = rest
                .iter()
                .any(|a| a.text.starts_with("-O") || a.text.starts_with("--open-files-in-pager"));
            if runs {
                return class.max(Mutating);
            }
            let writes = rest.iter().any(|a| {
                a.text == "-o" || a.text.starts_with("--output") || a.text.starts_with("--ext-diff")
            });
            if writes {
                FileWrite
            } else {
                Readonly
            }
        }
        _ => Mutating,
    };
    class.max(sub_class)
}

fn classify_git_push(rest: &[&Word]) -> ActionClass {
    let forced = rest.iter().any(|a| {
        let t = a.text.as_str();
        matches!(
            t,
            "--force" | "--mirror" | "--delete" | "--prune" | "--force-if-includes"
        ) || t.starts_with("--force-with-lease")
            || short_cluster_has(t, 'f')
            || short_cluster_has(t, 'd')
            || (t.starts_with('+') && t.len() > 1)
            || (t.starts_with(':') && t.len() > 1)
    });
    if forced {
        GitForcePush
    } else {
        Mutating
    }
}

fn classify_find(args: &[&Word], depth: usize) -> ActionClass {
    let mut class = Readonly;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.text.as_str() {
            "-delete" => class = class.max(FileDelete),
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                class = class.max(FileDelete);
                let end = args[i + 1..]
                    .iter()
                    .position(|w| w.text == ";" || w.text == "+")
                    .map_or(args.len(), |p| i + 1 + p);
                class = class.max(classify_command(&args[i + 1..end], depth));
                i = end;
            }
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => class = class.max(FileWrite),
            _ => {}
        }
        i += 1;
    }
    class
}

fn classify_xargs(args: &[&Word], depth: usize) -> ActionClass {
    const TAKES_ARG: &[&str] = &["-n", "-I", "-L", "-P", "-d", "-E", "-s", "-a", "-e", "-i"];
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if t == "--" {
            i += 1;
            break;
        }
        if !t.starts_with('-') {
            break;
        }
        i += if TAKES_ARG.contains(&t) { 2 } else { 1 };
    }
    if i >= args.len() {
        return Mutating;
    }
    classify_words(&args[i..], depth + 1)
}

fn classify_sed(args: &[&Word]) -> ActionClass {
    let in_place = args
        .iter()
        .any(|a| a.text.starts_with("--in-place") || short_cluster_has(&a.text, 'i'));
    if in_place {
        FileWrite
    } else {
        Mutating
    }
}

fn classify_sort(args: &[&Word]) -> ActionClass {
    if args
        .iter()
        .any(|a| a.text.starts_with("--compress-program"))
    {
        return Mutating;
    }
    if args
        .iter()
        .any(|a| a.text.starts_with("--output") || short_cluster_has(&a.text, 'o'))
    {
        return FileWrite;
    }
    Readonly
}

/// `uniq [OPTION]… [INPUT [OUTPUT]]`: a second operand is a file written.
fn classify_uniq(args: &[&Word]) -> ActionClass {
    const TAKES_ARG: &[&str] = &["-f", "-s", "-w"];
    let mut operands = 0;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if t.starts_with('-') && t.len() > 1 {
            i += if TAKES_ARG.contains(&t) { 2 } else { 1 };
            continue;
        }
        operands += 1;
        i += 1;
    }
    if operands >= 2 {
        FileWrite
    } else {
        Readonly
    }
}

/// `date` prints unless told to set the clock (`-s`, or a bare `MMDDhhmm…` operand).
fn classify_date(args: &[&Word]) -> ActionClass {
    const TAKES_ARG: &[&str] = &["-d", "-f", "-r", "--date", "--file", "--reference"];
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if t == "-s" || t.starts_with("--set") || short_cluster_has(t, 's') {
            return Mutating;
        }
        if t.starts_with('-') {
            i += if TAKES_ARG.contains(&t) { 2 } else { 1 };
            continue;
        }
        if !t.starts_with('+') {
            return Mutating;
        }
        i += 1;
    }
    Readonly
}

/// `tee FILE…` writes files; with no file it only passes its input through.
fn classify_tee(args: &[&Word]) -> ActionClass {
    let writes = args.iter().any(|a| {
        let option = a.text.starts_with('-') && a.text.len() > 1;
        !(option || HARMLESS_SINKS.contains(&a.text.as_str()))
    });
    if writes {
        FileWrite
    } else {
        Readonly
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(cmd: &str) -> &'static str {
        classify_bash(cmd).as_str()
    }

    fn expect(cases: &[(&str, &str)]) {
        for (cmd, want) in cases {
            assert_eq!(class(cmd), *want, "{cmd:?}");
        }
    }

    #[test]
    fn names_round_trip() {
        for c in ActionClass::ALL {
            assert_eq!(ActionClass::parse(c.as_str()), Some(c));
        }
        assert_eq!(ActionClass::parse("bash.anything"), None);
    }

    #[test]
    fn plain_read_only_commands() {
        for cmd in [
            "ls -la",
            "cat src/main.rs",
            "grep -rn foo src",
            "rg --json needle",
            "wc -l a b",
            "echo hello",
            "pwd",
            "",
            "   ",
            "head -n 5 x | tail -n 2",
            "ls && pwd || echo no; true",
            "date +%s",
            "date -u",
            "find . -name '*.rs' -type f",
            "cd src && ls",
            "ls 2>/dev/null",
            "ls 2>&1 | grep x",
            "cat <input.txt",
            "grep x <<< 'text'",
            "echo \"$(ls)\"",
            "echo `pwd`",
            "diff <(ls a) <(ls b)",
            "LC_ALL=C sort file",
            "sudo -u root ls",
            "timeout 5 grep x y",
            "env FOO=1 ls",
            "nice -n 10 cat x",
            "command ls",
            "for f in a b; do wc -l \"$f\"; done",
            "if test -f x; then cat x; fi",
            "echo a # rm -rf /",
            "sort -u file",
            "uniq -c input",
            "echo 'rm -rf /'",
            "cat <<EOF\nhello rm -rf\nEOF",
            "/usr/bin/ls",
            "bash -c 'ls | wc -l'",
        ] {
            assert_eq!(class(cmd), "bash.readonly", "{cmd:?}");
            assert!(is_read_only(cmd), "{cmd:?}");
        }
    }

    #[test]
    fn git_subcommands() {
        expect(&[
            ("git status", "bash.readonly"),
            ("git -C repo log --oneline", "bash.readonly"),
            ("git --no-pager diff HEAD~1", "bash.readonly"),
            ("git diff --output=patch.diff", "file.write"),
            ("git show -o x", "file.write"),
            ("git commit -m x", "bash.mutating"),
            ("git push origin main", "bash.mutating"),
            ("git push --force origin main", "git.force_push"),
            ("git push -f", "git.force_push"),
            ("git push -uf origin x", "git.force_push"),
            ("git push --force-with-lease=main", "git.force_push"),
            ("git push origin +main", "git.force_push"),
            ("git push --delete origin b", "git.force_push"),
            ("git push origin :old", "git.force_push"),
            ("git push --mirror", "git.force_push"),
            ("git reset --hard HEAD", "bash.destructive"),
            ("git reset HEAD~1", "bash.mutating"),
            ("git clean -fdx", "bash.destructive"),
            ("git clean -n", "bash.mutating"),
            ("git -c core.pager=evil log", "bash.mutating"),
            ("git rm a.txt", "file.delete"),
            ("git", "bash.readonly"),
            ("git $SUB", "bash.mutating"),
        ]);
    }

    #[test]
    fn redirections() {
        expect(&[
            ("echo x > out.txt", "file.write"),
            ("echo x >> out.txt", "file.write"),
            ("echo x >out.txt", "file.write"),
            ("ls 2> err.log", "file.write"),
            ("ls &> all.log", "file.write"),
            ("ls >| f", "file.write"),
            ("ls >&file", "file.write"),
            ("ls 1>&2", "bash.readonly"),
            ("cat <> f", "file.write"),
            ("echo x > \"$OUT\"", "file.write"),
            ("echo x | tee log", "file.write"),
            ("echo x | tee", "bash.readonly"),
            ("echo '>' not a redirect", "bash.readonly"),
            ("ls >", "bash.mutating"),
        ]);
    }

    #[test]
    fn deletes_and_destruction() {
        expect(&[
            ("rm -rf build", "file.delete"),
            ("ls && rm x", "file.delete"),
            ("ls | xargs rm", "file.delete"),
            ("ls | xargs -n 1 rm -f", "file.delete"),
            ("ls | xargs", "bash.mutating"),
            ("ls | xargs grep x", "bash.readonly"),
            ("find . -delete", "file.delete"),
            ("find . -name x -exec cat {} \\;", "file.delete"),
        ]);
        assert_eq!(
            class("find . -exec dd if=/dev/zero of=x \\;"),
            "bash.destructive"
        );
        expect(&[
            ("find . -fprint out", "file.write"),
            ("unlink a", "file.delete"),
            ("rmdir d", "file.delete"),
            ("dd if=/dev/zero of=/dev/sda", "bash.destructive"),
            ("mkfs.ext4 /dev/sdb1", "bash.destructive"),
            ("shred -u secret", "bash.destructive"),
            (":(){ :|:& };:", "bash.destructive"),
            ("/bin/rm x", "file.delete"),
            ("\\rm x", "file.delete"),
            ("'r'\"m\" x", "file.delete"),
            ("sudo rm -rf /", "file.delete"),
            ("sudo -u root rm x", "file.delete"),
            ("timeout 5 rm x", "file.delete"),
            ("env -i PATH_X=1 rm x", "file.delete"),
            ("env -S 'rm -rf x'", "file.delete"),
            ("nohup nice rm x &", "file.delete"),
        ]);
    }

    #[test]
    fn substitutions_and_subshells() {
        expect(&[
            ("echo $(rm x)", "file.delete"),
            ("echo \"$(rm x)\"", "file.delete"),
            ("echo `rm x`", "file.delete"),
            ("cat <(rm x)", "file.delete"),
            ("ls >(rm x)", "file.delete"),
            ("(cd x && rm y)", "file.delete"),
            ("{ ls; rm y; }", "file.delete"),
            ("echo $(echo $(git push -f))", "git.force_push"),
            ("echo ${X:-$(rm y)}", "file.delete"),
            ("echo $((1 + 2))", "bash.readonly"),
            ("echo $(( $(rm y) + 1 ))", "file.delete"),
            ("bash -c 'rm -rf x'", "file.delete"),
            ("sh -c \"git push --force\"", "git.force_push"),
            ("eval 'rm x'", "file.delete"),
            ("eval ls", "bash.readonly"),
            ("eval \"$X\"", "bash.mutating"),
            ("cat <<EOF\n$(rm x)\nEOF", "file.delete"),
            ("cat <<'EOF'\n$(rm x)\nEOF", "bash.readonly"),
        ]);
    }

    #[test]
    fn editing_commands() {
        expect(&[
            ("sed -i 's/a/b/' f", "file.write"),
            ("sed -i.bak 's/a/b/' f", "file.write"),
            ("sed -Ei 's/a/b/' f", "file.write"),
            ("sed --in-place 's/a/b/' f", "file.write"),
            ("sed 's/a/b/' f", "bash.mutating"),
            ("sort -o out in", "file.write"),
            ("sort --output=out in", "file.write"),
            ("sort --compress-program=sh in", "bash.mutating"),
            ("uniq in out", "file.write"),
            ("uniq -f 2 in", "bash.readonly"),
            ("date 010100002030", "bash.mutating"),
            ("date -s now", "bash.mutating"),
            ("date -d yesterday +%F", "bash.readonly"),
            ("rg --pre=sh x", "bash.mutating"),
        ]);
    }

    #[test]
    fn unknown_and_malformed_fail_closed() {
        for cmd in [
            "python3 script.py",
            "npm install",
            "cargo build",
            "mv a b",
            "cp a b",
            "touch x",
            "./ls",
            "src/ls",
            "$CMD arg",
            "\"$CMD\"",
            "echo 'unterminated",
            "echo \"unterminated",
            "echo $(ls",
            "echo `ls",
            "PATH=/tmp ls",
            "LD_PRELOAD=evil.so ls",
            "GIT_PAGER=evil git log",
            "export PATH=/tmp",
            "env PATH=/tmp ls",
            "sudo $CMD",
            "function f { ls; }",
            "source env.sh",
            ". env.sh",
            "awk '{print}' f",
            "cat <<EOF\nunterminated",
        ] {
            let got = classify_bash(cmd);
            assert!(
                got.bash_severity() >= Mutating.bash_severity(),
                "{cmd:?} classified {got}"
            );
            assert!(!is_read_only(cmd), "{cmd:?}");
        }
    }

    #[test]
    fn disguised_commands_are_seen() {
        expect(&[
            ("$'\\x72m' -rf x", "file.delete"),
            ("$'\\162m' x", "file.delete"),
            ("$'r\\u006d' x", "file.delete"),
            ("echo $'a\\'b'", "bash.readonly"),
            ("echo $\"translated\"", "bash.readonly"),
            ("{rm,-rf,x}", "file.delete"),
            ("r{m,x} y", "file.delete"),
            ("find . {-delete,-print}", "file.delete"),
            ("git push {--force,} origin", "git.force_push"),
            ("echo {a,b}{c,d}", "bash.readonly"),
            ("echo ${x,,}", "bash.readonly"),
            ("/opt/bin/rm x", "file.delete"),
            ("./ls", "bash.mutating"),
            ("./rm x", "file.delete"),
            ("./sudo rm x", "bash.mutating"),
            ("echo rm x | sudo -s", "bash.mutating"),
            ("sudo -i", "bash.mutating"),
            ("coproc rm x", "file.delete"),
            ("rg --hostname-bin=sh x", "bash.mutating"),
            ("file -C -m magic", "file.write"),
            ("git grep -O x", "bash.mutating"),
            ("git grep --open-files-in-pager=vim x", "bash.mutating"),
        ]);
        let many = format!("echo {}", "{a,b}".repeat(10));
        assert_eq!(class(&many), "bash.mutating", "a bounded expansion");
    }

    #[test]
    fn deep_nesting_is_bounded() {
        let cmd = format!("{}ls{}", "$(".repeat(200), ")".repeat(200));
        assert_eq!(class(&cmd), "bash.mutating");
        let huge = format!("echo {}", "a".repeat(MAX_COMMAND_BYTES));
        assert_eq!(class(&huge), "bash.destructive");
    }
}
