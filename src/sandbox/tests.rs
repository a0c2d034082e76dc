use std::io::Read;
use std::os::fd::AsFd;

use super::*;
use crate::exec::spawn;

fn policy(mode: SandboxMode, network: bool) -> Policy {
    Policy {
        mode,
        network,
        roots: Vec::new(),
    }
}

#[test]
fn limits_only_narrow_the_hosts_policy() {
    let cwd = PathBuf::from("/");
    let mut sandbox = Sandbox::new(policy(SandboxMode::DangerFullAccess, false), cwd, None);
    let e = sandbox.effective();
    assert_eq!(
        (e.mode, e.network, e.limited_by),
        (SandboxMode::DangerFullAccess, true, None)
    );
    sandbox.set_limits(Limits {
        plan: true,
        ..Limits::default()
    });
    let e = sandbox.effective();
    assert_eq!(
        (e.mode, e.limited_by),
        (SandboxMode::ReadOnly, Some("plan-mode"))
    );
    sandbox.set_limits(Limits {
        unattended: Some((true, false)),
        ..Limits::default()
    });
    let e = sandbox.effective();
    assert_eq!(
        (e.mode, e.network, e.limited_by),
        (SandboxMode::WorkspaceWrite, false, Some("unattended"))
    );
    sandbox.set_policy(policy(SandboxMode::ReadOnly, true));
    let e = sandbox.effective();
    assert_eq!((e.mode, e.network), (SandboxMode::ReadOnly, false));
}

#[test]
fn only_the_hosts_own_policy_may_escalate() {
    let dir = tempfile::tempdir().unwrap();
    let mut sandbox = Sandbox::new(
        policy(SandboxMode::WorkspaceWrite, false),
        dir.path().into(),
        None,
    );
    assert!(sandbox.commands().may_escalate);
    sandbox.set_limits(Limits {
        stage: true,
        ..Limits::default()
    });
    assert!(!sandbox.commands().may_escalate);
    sandbox.set_limits(Limits {
        unattended: Some((true, true)),
        ..Limits::default()
    });
    assert!(!sandbox.commands().may_escalate);
    sandbox.set_policy(policy(SandboxMode::DangerFullAccess, true));
    sandbox.set_limits(Limits::default());
    assert!(!sandbox.commands().may_escalate);
}

/// Runs `script` with bash in `cwd` under `launch`; its exit code and output.
fn run(launch: &Launch, cwd: &Path, script: &str) -> (Option<i32>, String) {
    let confine = match launch {
        Launch::Confined(c) => Some(c.clone()),
        Launch::Unconfined => None,
        Launch::Refused(e) => panic!("refused: {e}"),
    };
    let tmpdir = confine.as_ref().and_then(|c| c.tmpdir.clone());
    let env = std::env::vars_os().chain(tmpdir.map(|t| ("TMPDIR".into(), t.into_os_string())));
    let _shells = crate::exec::orphans::shells();
    let launch = spawn::Launch::shell_command("/bin/bash", script, cwd, env)
        .unwrap()
        .confined(confine);
    let null = std::fs::File::open("/dev/null").unwrap();
    let (mut reader, writer) = std::io::pipe().unwrap();
    let mut child = spawn::spawn(&launch, null.as_fd(), writer.as_fd(), writer.as_fd()).unwrap();
    drop(writer);
    let mut output = String::new();
    reader.read_to_string(&mut output).unwrap();
    (child.wait().unwrap().code(), output)
}

/// The kernel, not gjc, refuses: a confined shell cannot write outside its roots however it
/// spells the path, while writes inside the cwd and the temp dir work.
#[test]
fn a_confined_shell_writes_only_beneath_its_roots() {
    assert!(landlock_abi(None) >= MIN_FS_ABI, "this test needs Landlock");
    let work = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let mut sandbox = Sandbox::new(
        policy(SandboxMode::WorkspaceWrite, false),
        work.path().into(),
        None,
    );
    let commands = sandbox.commands();
    let out = outside.path().display().to_string();
    let script = format!(
        r#"echo in > inside.txt && echo tmp > "$TMPDIR/t" && echo ok
        echo x > {out}/a 2>/dev/null || echo refused-abs
        echo x > ../{name}/b 2>/dev/null || echo refused-dotdot
        ln -s {out} link && (echo x > link/c) 2>/dev/null || echo refused-link
        echo x > /proc/self/root{out}/d 2>/dev/null || echo refused-proc
        mv inside.txt {out}/e 2>/dev/null || echo refused-rename
        ln inside.txt {out}/f 2>/dev/null || echo refused-hardlink"#,
        name = outside.path().file_name().unwrap().to_string_lossy()
    );
    let (code, output) = run(&commands.launch, work.path(), &script);
    for word in [
        "ok",
        "refused-abs",
        "refused-dotdot",
        "refused-link",
        "refused-proc",
        "refused-rename",
        "refused-hardlink",
    ] {
        assert!(
            output.contains(word),
            "{word} missing in {output:?} ({code:?})"
        );
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    assert!(work.path().join("inside.txt").exists());
}

#[test]
fn read_only_writes_nowhere_and_network_off_refuses_inet_sockets() {
    let work = tempfile::tempdir().unwrap();
    let mut sandbox = Sandbox::new(
        policy(SandboxMode::ReadOnly, false),
        work.path().into(),
        None,
    );
    let commands = sandbox.commands();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        r#"cat /etc/hostname >/dev/null && echo read-ok
        echo x > mine.txt 2>/dev/null || echo refused-write
        (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null || echo refused-net
        echo x > /dev/null && echo devnull-ok"#
    );
    let (_, output) = run(&commands.launch, work.path(), &script);
    for word in ["read-ok", "refused-write", "refused-net", "devnull-ok"] {
        assert!(output.contains(word), "{word} missing in {output:?}");
    }
    assert!(!work.path().join("mine.txt").exists());
}

/// A session without a sandbox builds nothing for its hooks and the host's `bash`.
#[test]
fn without_a_sandbox_nothing_is_prepared_for_commands() {
    let mut sandbox = Sandbox::new(
        policy(SandboxMode::DangerFullAccess, false),
        "/".into(),
        None,
    );
    assert!(matches!(sandbox.launch(), Launch::Unconfined));
    assert!(sandbox.commands.is_none() && sandbox.temp.is_none());
    assert!(matches!(sandbox.commands().read_only, Launch::Confined(_)));
    assert!(matches!(sandbox.launch(), Launch::Unconfined));
}

/// Each refused policy says what was wrong, with the root it was about.
#[test]
fn a_bad_policy_is_refused_for_what_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("f");
    std::fs::write(&file, "x").unwrap();
    let e = Policy::from_args(Some("open"), false, false, &[]).unwrap_err();
    assert!(
        matches!(&e, PolicyError::UnknownMode(m) if m == "open"),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "unknown sandbox policy \"open\"");
    let roots = |r: &str| parse_roots(&[r.to_string()]).unwrap_err();
    assert!(matches!(roots("rel"), PolicyError::RelativeRoot(r) if r == "rel"));
    let f = file.display().to_string();
    assert!(matches!(roots(&f), PolicyError::RootNotFolder(r) if r == f));
    let missing = tmp.path().join("missing").display().to_string();
    let e = roots(&missing);
    assert!(
        matches!(&e, PolicyError::Root { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
        "{e:?}"
    );
    assert!(e
        .to_string()
        .starts_with(&format!("writable root {missing:?}: ")));
    let ok = Policy::from_args(None, true, false, &[tmp.path().to_path_buf()]).unwrap();
    assert_eq!(ok.roots, vec![tmp.path().to_path_buf()]);
}
