//! The process boundary under attack: spill files, escaped children, the parent watch, API keys
//! in commands and their output, and crashed threads.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::framing::{has_exited, wait_gone};
use crate::support::{gjc, TIMEOUT};

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o777
}

/// Kills a process this test may have left behind (only when the code under test failed).
pub(crate) fn kill_leftover(pid: u32) {
    if !has_exited(pid) {
        // SAFETY: plain syscall on a pid this test learnt from the command it ran.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
}

#[test]
fn spill_files_are_private_and_ignore_a_planted_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let attacker = tmp.path().join("attacker");
    std::fs::create_dir(&attacker).unwrap();
    let mut g = gjc().env("TMPDIR", tmp.path().to_str().unwrap()).spawn();
    // The name the spill folder used to have: predictable from the pid alone.
    let planted = tmp.path().join(format!("gjc-{}", g.client.pid()));
    std::os::unix::fs::symlink(&attacker, &planted).unwrap();

    let d = g.ok(json!({"type": "bash", "command": "seq 1 100000"}));
    assert_eq!(d["truncated"], true);
    let path = PathBuf::from(d["fullOutputPath"].as_str().unwrap());
    let dir = path.parent().unwrap().to_path_buf();
    assert_eq!(
        std::fs::read_dir(&attacker).unwrap().count(),
        0,
        "output went through the planted link"
    );
    assert_eq!(dir.parent(), Some(tmp.path()));
    assert_ne!(dir, planted);
    assert!(std::fs::symlink_metadata(&dir).unwrap().is_dir());
    assert_eq!(mode(&dir), 0o700, "spill folder mode");
    assert_eq!(mode(&path), 0o600, "spill file mode");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap().lines().count(),
        100_000
    );

    assert!(g.close_and_wait().is_some());
    assert!(!dir.exists(), "the spill folder outlived gjc");
}

#[test]
fn kept_spill_output_survives_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let mut g = gjc()
        .env("TMPDIR", tmp.path().to_str().unwrap())
        .args(&["--keep-bash-output"])
        .spawn();
    let d = g.ok(json!({"type": "bash", "command": "seq 1 100000"}));
    let path = PathBuf::from(d["fullOutputPath"].as_str().unwrap());
    assert!(g.close_and_wait().is_some());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap().lines().count(),
        100_000
    );
    assert_eq!(mode(path.parent().unwrap()), 0o700);
}

#[test]
fn children_that_leave_the_command_session_die_with_the_command() {
    let mut g = gjc().spawn();
    // A direct escape, and one that forks again below the escaped process.
    let d = g.ok(json!({"type": "bash", "command":
        "setsid sleep 1000 >/dev/null 2>&1 & echo $!; \
         setsid sh -c 'sleep 1000 & echo $! > inner; wait' >/dev/null 2>&1 & \
         while [ ! -s inner ]; do sleep 0.01; done; cat inner"}));
    let pids: Vec<u32> = d["output"]
        .as_str()
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().expect("a pid"))
        .collect();
    assert_eq!(pids.len(), 2, "{d}");
    let survivors: Vec<u32> = pids.iter().copied().filter(|p| !has_exited(*p)).collect();
    pids.iter().for_each(|p| kill_leftover(*p));
    assert!(survivors.is_empty(), "{survivors:?} outlived their command");
    // gjc itself and its session are untouched.
    g.ok(json!({"type": "get_state"}));
}

#[test]
fn escaped_children_of_a_running_command_die_at_exit() {
    let mut g = gjc().spawn();
    let pid_file = g.project.join("escaped.pid");
    g.client
        .send(&json!({"id": "b", "type": "bash", "command":
            "setsid sleep 1000 >/dev/null 2>&1 & echo $! > escaped.pid.tmp; mv escaped.pid.tmp escaped.pid; sleep 1000"}))
        .unwrap();
    let deadline = Instant::now() + TIMEOUT;
    while !pid_file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!has_exited(pid));
    assert!(g.close_and_wait().is_some(), "gjc did not exit");
    let gone = wait_gone(pid, Duration::from_secs(2));
    kill_leftover(pid);
    assert!(gone, "{pid} outlived gjc");
}

#[test]
fn a_host_thread_that_spawned_gjc_can_end() {
    // Hosts start gjc from worker threads (thread pools, spawn_blocking); the thread ending is
    // not the host ending.
    let mut g = std::thread::spawn(|| gjc().spawn()).join().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    g.ok(json!({"type": "get_state"}));
    assert!(!has_exited(g.client.pid()));
}

/// A Python host that starts gjc from a thread, which ends once gjc is ready; the host then
/// prints gjc's pid and waits. gjc's stdin is this test's pipe, so only the parent's death can
/// end it.
const THREAD_HOST: &str = r#"
import subprocess, sys, threading, time
box = []
def start():
    p = subprocess.Popen([sys.argv[1], "--mode", "rpc", "--no-session"], stdin=0, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    box.append((p, p.stdout.readline()))
t = threading.Thread(target=start)
t.start()
t.join()
print(box[0][0].pid, box[0][1].decode().strip(), flush=True)
time.sleep(1000)
"#;

/// The host process, killed however the test ends.
pub(crate) struct Host(pub std::process::Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn gjc_ends_within_a_second_of_its_parent_process() {
    let mut command = Command::new("python3");
    let _home = crate::support::isolate(&mut command);
    let mut host = Host(
        command
            .args(["-c", THREAD_HOST, env!("CARGO_BIN_EXE_gjc")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3"),
    );
    let _stdin = host.0.stdin.take().unwrap();
    let mut out = BufReader::new(host.0.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let (pid, ready) = line.trim().split_once(' ').expect("pid and ready");
    let pid: u32 = pid.parse().expect("gjc's pid");
    assert!(ready.starts_with(r#"{"type":"ready","#), "{ready}");
    // The spawning thread has ended; gjc stays.
    std::thread::sleep(Duration::from_millis(1500));
    let alive = !has_exited(pid);
    assert!(alive, "gjc ended with its spawning thread");

    drop(host);
    let gone = wait_gone(pid, Duration::from_secs(1));
    kill_leftover(pid);
    assert!(gone, "gjc {pid} outlived its parent by more than a second");
}

const KEY: &str = "sk-ant-test-0123456789abcdef";

#[test]
fn api_keys_stay_out_of_commands_and_their_output() {
    let mut g = gjc()
        .provider("http://127.0.0.1:9")
        .env("ANTHROPIC_API_KEY", KEY)
        .env("MY_COPY_OF_THE_KEY", "test-key")
        .spawn();
    let d = g.ok(json!({"type": "bash", "command":
        "printenv ANTHROPIC_API_KEY MY_COPY_OF_THE_KEY; echo \"seen=${ANTHROPIC_API_KEY:-none},${MY_COPY_OF_THE_KEY:-none}\""}));
    assert_eq!(d["output"], "seen=none,none\n");
    // A key that reaches the output another way is replaced.
    let d = g.ok(json!({"type": "bash", "command": format!("echo '{KEY}' test-key")}));
    assert_eq!(d["output"], "[redacted] [redacted]\n");
    let recorded: Vec<Value> = g
        .messages()
        .into_iter()
        .filter(|m| m["role"] == "bashExecution")
        .map(|m| m["output"].clone())
        .collect();
    assert_eq!(
        recorded,
        [json!("seen=none,none\n"), json!("[redacted] [redacted]\n")]
    );
}

#[test]
fn passing_secrets_to_tools_is_explicit_and_output_is_still_scrubbed() {
    let mut g = gjc()
        .args(&["--pass-secrets-to-tools"])
        .env("ANTHROPIC_API_KEY", KEY)
        .spawn();
    let d = g.ok(json!({"type": "bash", "command":
        "printenv ANTHROPIC_API_KEY; printenv ANTHROPIC_API_KEY | wc -c"}));
    assert_eq!(d["output"], format!("[redacted]\n{}\n", KEY.len() + 1));
}

/// Runs one scripted bash tool call with `env` set: gjc, the run's events, and the call's end.
fn run_bash_tool(env: (&str, &str), command: &str) -> (crate::support::Gjc, Vec<Value>, Value) {
    run_tool(env, "bash", json!({"command": command}))
}

/// Runs one scripted call of `tool` with `env` set: gjc, the run's events, and the call's end.
fn run_tool(
    env: (&str, &str),
    tool: &str,
    arguments: Value,
) -> (crate::support::Gjc, Vec<Value>, Value) {
    let mut g = gjc()
        .env(env.0, env.1)
        .script(json!({"turns": [
            {"content": [{"type": "toolCall", "id": "c1", "name": tool, "arguments": arguments}]},
            {"content": [{"type": "text", "text": "ok"}]}
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .expect("tool_execution_end")
        .clone();
    (g, events, end)
}

#[test]
fn tool_results_are_scrubbed_before_they_are_sent_or_stored() {
    let command = format!("sleep 0.1; echo 'key: {KEY}'; sleep 0.2");
    let (mut g, events, end) = run_bash_tool(("OPENAI_API_KEY", KEY), &command);
    assert_eq!(end["result"]["content"][0]["text"], "key: [redacted]");
    let updates: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_update")
        .collect();
    assert!(!updates.is_empty(), "the output is streamed");
    for e in updates {
        assert!(!e["partialResult"].to_string().contains(KEY), "key in {e}");
    }
    let tool_message = g
        .messages()
        .into_iter()
        .find(|m| m["role"] == "toolResult")
        .expect("tool result message");
    assert_eq!(tool_message["content"][0]["text"], "key: [redacted]");
}

/// gjc run directly, so that its stderr and exit status can be read.
fn crash_with(thread: &str) -> (Option<i32>, String) {
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gjc"))
        .args(["--mode", "rpc", "--no-session"])
        .env("HOME", home.path())
        .env("GJC_CODING_AGENT_DIR", home.path().join("agent"))
        .env("GJC_TEST_PANIC", thread)
        .current_dir(home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    drop(child.stdin.take());
    (status.and_then(|s| s.code()), reader.join().unwrap())
}

#[test]
fn a_crashed_role_thread_ends_the_process_with_a_failure() {
    for thread in ["gjc-session", "gjc-bash", "gjc-stdout"] {
        let (code, stderr) = crash_with(thread);
        assert_eq!(code, Some(101), "{thread}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("panicked")).collect();
        assert_eq!(lines.len(), 1, "{thread}: {stderr}");
        assert!(
            lines[0].contains(thread) && lines[0].contains("GJC_TEST_PANIC"),
            "{thread}: {stderr}"
        );
    }
}

#[test]
fn a_panicking_tool_becomes_an_error_result() {
    let (mut g, _, end) = run_tool(("GJC_TEST_PANIC", "gjc-tool"), "ls", json!({}));
    assert_eq!(end["isError"], true);
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(text, "tool ls failed unexpectedly");
    g.ok(json!({"type": "get_state"}));
    assert_eq!(g.close_and_wait().and_then(|s| s.code()), Some(0));
}

/// An idle process runs only the threads that serve it from the start: the lookahead thread
/// (`gjc-stdin-queue`) starts the first time the command lane is full, which an answered
/// `get_state` does not make it.
#[test]
fn an_idle_process_runs_only_its_standing_threads() {
    let mut g = gjc().spawn();
    g.ok(json!({"type": "get_state"}));
    let threads = crate::support::procfs::named_threads(g.client.pid());
    assert_eq!(
        threads,
        [
            "gjc",
            "gjc-bash",
            "gjc-host",
            "gjc-session",
            "gjc-signal",
            "gjc-stdin",
            "gjc-stdout"
        ],
        "threads of an idle process"
    );
    assert_eq!(g.close_and_wait().and_then(|s| s.code()), Some(0));
}

/// A running command costs gjc no thread: `gjc-bash` reads its output and learns of its exit
/// itself, so while a command runs (after printing megabytes) gjc has exactly its idle threads.
#[test]
fn a_running_command_adds_no_thread() {
    let mut g = gjc().spawn();
    g.ok(json!({"type": "get_state"}));
    let pid = g.client.pid();
    let idle = crate::support::procfs::named_threads(pid);
    g.client
        .send(&json!({"id": "b", "type": "bash", "command":
            "head -c 3000000 /dev/zero | tr '\\0' x; echo; : > started.tmp; mv started.tmp started; sleep 1000"}))
        .unwrap();
    let started = g.project.join("started");
    let deadline = Instant::now() + TIMEOUT;
    while !started.exists() {
        assert!(Instant::now() < deadline, "the command never got going");
        std::thread::sleep(Duration::from_millis(5));
    }
    let busy = crate::support::procfs::named_threads(pid);
    g.ok(json!({"type": "abort_bash"}));
    let d = g.client.wait_for(|f| f["id"] == "b", TIMEOUT).unwrap();
    assert_eq!(busy, idle, "threads while a command runs");
    assert_eq!(d["data"]["cancelled"], true, "{d}");
    assert_eq!(d["data"]["truncated"], true, "{d}");
}

/// gjc's own threads run under `SCHED_BATCH` (src/sched.rs), so a woken thread does not take the
/// core from the one that woke it; what it runs for the user gets the default policy back.
#[test]
fn gjc_threads_are_batched_and_the_commands_it_runs_are_not() {
    const SCHED_OTHER: u32 = 0;
    const SCHED_BATCH: u32 = 3;
    let mut g = gjc().spawn();
    g.ok(json!({"type": "get_state"}));
    let threads = crate::support::procfs::thread_policies(g.client.pid());
    assert!(threads.len() > 3, "{threads:?}");
    for (name, policy) in &threads {
        assert_eq!(*policy, SCHED_BATCH, "thread {name}: {threads:?}");
    }
    // awk reports its own policy: its name holds no space, so field 41 is the policy.
    let d = g.ok(json!({"type": "bash", "command": "awk '{print $41}' /proc/self/stat"}));
    assert_eq!(
        d["output"].as_str().map(str::trim),
        Some(SCHED_OTHER.to_string().as_str()),
        "{d}"
    );
}

/// The loader maps no libm and no libgcc_s: gjc defines the one function its dependencies take
/// from libm (`src/loader.rs`) and links the unwinder in (build.rs); loading either cost every
/// start time and resident pages.
#[test]
fn the_binary_loads_no_libm_and_no_libgcc_s() {
    // glibc's loader lists what it would load and exits, without running the program.
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_gjc"));
    let _home = crate::support::isolate(&mut command);
    let out = command
        .env("LD_TRACE_LOADED_OBJECTS", "1")
        .output()
        .expect("run the loader");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("libc.so"), "not glibc's listing: {listed}");
    assert!(!listed.contains("libm.so"), "libm is loaded: {listed}");
    // The unwinder is linked in (build.rs), so libgcc_s is not loaded either.
    assert!(!listed.contains("libgcc_s"), "libgcc_s is loaded: {listed}");
}
