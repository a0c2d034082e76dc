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
