//! The classifiers of commands known by name: what each does with its arguments.

use super::{
    classify_command, classify_depth, classify_words, listed, ActionClass, HARMLESS_SINKS,
    READ_ONLY,
};
use crate::control::lex::Word;
use ActionClass::{
    BashDestructive as Destructive, BashMutating as Mutating, BashReadonly as Readonly, FileDelete,
    FileWrite, GitForcePush,
};

pub(super) fn classify_named(name: &str, args: &[&Word], depth: usize) -> ActionClass {
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
