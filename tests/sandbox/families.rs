//! The ways a command that looks like a read writes anyway, each aimed at a file inside the
//! project and one outside it: every place a command can come from runs them all, and the
//! kernel must leave both untouched under a read-only policy, whatever the classifier thought.

use std::path::Path;
use std::process::Command;

/// The families, by name, as `(name, command)` per target.
fn family(target: &Path) -> Vec<(&'static str, String)> {
    let t = target.display();
    vec![
        // Parameter transformation runs the command substitution inside the value.
        (
            "prompt expansion",
            format!("x='$(touch {t}-p)'; echo ${{x@P}}"),
        ),
        // Array subscripts are evaluated in arithmetic contexts.
        (
            "[[ -eq ]] subscript",
            format!("[[ 1 -eq 'a[$(touch {t}-a)]' ]]; true"),
        ),
        (
            "printf -v subscript",
            format!("printf -v 'a[$(touch {t}-v)]' x"),
        ),
        (
            "read into a subscript",
            format!("read 'a[$(touch {t}-r)]' <<< x"),
        ),
        // Options of harmless-looking programs that run others.
        ("env -S", format!("env -S 'touch {t}-e'")),
        ("xargs", format!("echo {t}-x | xargs touch")),
        // The repository's own configuration (set up by `repository`).
        ("git diff external", "git diff".to_string()),
    ]
}

/// Makes the project a git repository whose configuration runs a program on `git diff`
/// (`diff.external`), aimed at both targets.
pub fn repository(project: &Path, outside: &Path) {
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
            .args(args)
            .current_dir(project)
            .output()
            .expect("git")
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(project.join("tracked.txt"), "one\n").unwrap();
    git(&["add", "tracked.txt"]);
    git(&["commit", "-qm", "one"]);
    std::fs::write(project.join("tracked.txt"), "two\n").unwrap();
    let external = format!(
        "touch {} {};:",
        project.join("pwned-git").display(),
        outside.join("pwned-git").display()
    );
    git(&["config", "diff.external", &external]);
}

/// Every family's command, aimed inside the project and outside it.
pub fn commands(project: &Path, outside: &Path) -> Vec<String> {
    let inside = family(&project.join("pwned"));
    let outer = family(&outside.join("pwned"));
    inside
        .into_iter()
        .chain(outer)
        .map(|(_, command)| command)
        .collect()
}

/// Nothing was written: no `pwned*` file in the project, nothing at all outside.
pub fn assert_untouched(place: &str, project: &Path, outside: &Path) {
    let planted: Vec<String> = std::fs::read_dir(project)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("pwned"))
        .collect();
    assert!(
        planted.is_empty(),
        "{place}: written in the project: {planted:?}"
    );
    let outside: Vec<_> = std::fs::read_dir(outside).unwrap().flatten().collect();
    assert!(outside.is_empty(), "{place}: written outside: {outside:?}");
}

/// The scripted model calling bash with each command, one turn each, then a last word.
pub fn turns(commands: &[String]) -> serde_json::Value {
    let mut turns: Vec<serde_json::Value> = commands
        .iter()
        .enumerate()
        .map(|(i, c)| serde_json::json!({"content": [{"type": "toolCall", "name": "bash", "id": format!("call_{i}"), "arguments": {"command": c}}]}))
        .collect();
    turns.push(serde_json::json!({"content": [{"type": "text", "text": "Done."}]}));
    serde_json::json!({ "turns": turns })
}

/// That the families really write when nothing stops them: run unconfined, each leaves its file.
#[test]
fn every_family_writes_when_nothing_stops_it() {
    let project = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    repository(project.path(), outside.path());
    for command in commands(project.path(), outside.path()) {
        Command::new("bash")
            .args(["-c", &command])
            .current_dir(project.path())
            .output()
            .unwrap();
    }
    let written = std::fs::read_dir(outside.path()).unwrap().count();
    assert_eq!(
        written,
        family(Path::new("x")).len(),
        "one file per family outside"
    );
}
