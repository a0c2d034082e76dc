use super::*;

fn run(command: &str, timeout: Option<Duration>) -> BashResult {
    let dir = tempfile::tempdir().unwrap();
    let (handle, thread) = spawn(dir.path().to_path_buf(), false, None).unwrap();
    let (tx, rx) = unbounded();
    handle.run(BashJob {
        owner: JobOwner::User,
        command: command.into(),
        cwd: dir.path().into(),
        timeout,
        stream: false,
        confine: None,
        stderr: None,
        output_limit: None,
        reply: tx.into(),
    });
    let result = loop {
        match rx
            .recv_timeout(Duration::from_secs(20))
            .expect("bash result")
        {
            BashEvent::Exit { result, .. } => break result,
            BashEvent::Output { .. } => {}
        }
    };
    handle.shutdown();
    thread.join().unwrap();
    result
}

#[test]
fn merges_streams_and_reports_exit_code() {
    let r = run("echo out; echo err 1>&2; exit 3", None);
    assert_eq!(r.exit_code, Some(3));
    assert!(
        r.output.contains("out\n") && r.output.contains("err\n"),
        "{:?}",
        r.output
    );
}

#[test]
fn background_children_do_not_hold_the_command_open() {
    let started = Instant::now();
    let r = run("sleep 1000 & echo started", None);
    assert_eq!(r.exit_code, Some(0));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn timeout_kills_the_group() {
    let r = run("sleep 30", Some(Duration::from_millis(200)));
    assert!(r.timed_out);
    assert_eq!(r.exit_code, None);
}

#[test]
fn utf8_split_across_reads_is_kept() {
    let mut buf = "é".as_bytes()[..1].to_vec();
    assert_eq!(job::take_valid_utf8(&mut buf), "");
    buf.push("é".as_bytes()[1]);
    assert_eq!(job::take_valid_utf8(&mut buf), "é");
}

#[test]
fn invalid_utf8_is_replaced_and_valid_text_kept() {
    let r = run(r"printf 'a\377b \303\251 \360\237\230\200\n'", None);
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(r.output, "a\u{fffd}b é 😀\n");
}

/// Runs `command` through `handle` and waits for its result.
fn run_on(handle: &BashHandle, cwd: &std::path::Path, command: &str) -> BashResult {
    let (tx, rx) = unbounded();
    handle.run(BashJob {
        owner: JobOwner::User,
        command: command.into(),
        cwd: cwd.into(),
        timeout: None,
        stream: false,
        confine: None,
        stderr: None,
        output_limit: None,
        reply: tx.into(),
    });
    loop {
        match rx
            .recv_timeout(Duration::from_secs(20))
            .expect("bash result")
        {
            BashEvent::Exit { result, .. } => break result,
            BashEvent::Output { .. } => {}
        }
    }
}

#[test]
fn clearing_spill_files_keeps_the_other_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, thread) = spawn(dir.path().to_path_buf(), false, None).unwrap();
    let (one, two) = (handle.for_session(1), handle.for_session(2));
    // More than the kept tail, so the full output goes to a spill file.
    let big = "head -c 200000 /dev/zero | tr '\\0' a";
    let spilled = |r: BashResult| r.full_output_path.expect("a spill file");
    let first = spilled(run_on(&one, dir.path(), big));
    let second = spilled(run_on(&two, dir.path(), big));
    one.clear_spill();
    // Requests are handled in order: once this has run, the clearing has too.
    run_on(&one, dir.path(), "true");
    assert!(!first.exists(), "session 1's spill file is cleared");
    assert!(second.exists(), "session 2's spill file stays");
    handle.shutdown();
    thread.join().unwrap();
}
