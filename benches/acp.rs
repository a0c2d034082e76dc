//! ACP start-up beside RPC start-up, interleaved in one run: for `--mode acp`, spawn →
//! `initialize` answered and spawn → `session/new` answered; for `--mode rpc`, spawn → `ready`
//! and spawn → first `get_state` response; idle RSS after each.
//!
//! Run: `cargo bench --bench acp [-- runs]`

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

struct Sample {
    first: f64,
    second: f64,
    rss_kib: u64,
}

/// Reads lines until one contains `needle`.
fn wait_for(stdout: &mut BufReader<ChildStdout>, needle: &str) {
    let mut line = String::new();
    loop {
        line.clear();
        let n = stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "gjc closed stdout before {needle}");
        if line.contains(needle) {
            return;
        }
    }
}

/// One process: `steps` are (line to send, or none; what marks its answer).
fn measure(
    gjc: &Path,
    mode: &str,
    dirs: (&Path, &Path),
    steps: [(Option<String>, &str); 2],
) -> Sample {
    let (agent, project) = dirs;
    let mut command = Command::new(gjc);
    command.args(["--mode", mode, "--cwd"]).arg(project);
    command
        .env("GJC_CODING_AGENT_DIR", agent)
        .stderr(Stdio::null());
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let (mut stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    let mut stdout = BufReader::new(stdout);
    let mut times = Vec::new();
    for (send, answer) in steps {
        if let Some(line) = send {
            stdin.write_all(line.as_bytes()).unwrap();
            stdin.write_all(b"\n").unwrap();
            stdin.flush().unwrap();
        }
        wait_for(&mut stdout, answer);
        times.push(ms(started.elapsed()));
    }
    std::thread::sleep(Duration::from_millis(50));
    let rss_kib = status_kib(child.id(), "VmRSS:").unwrap_or(0);
    drop(stdin);
    let _ = child.wait();
    Sample {
        first: times[0],
        second: times[1],
        rss_kib,
    }
}

fn acp(gjc: &Path, dirs: (&Path, &Path)) -> Sample {
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;
    let new = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"session/new","params":{{"cwd":{},"mcpServers":[]}}}}"#,
        serde_json::to_string(&dirs.1.display().to_string()).unwrap()
    );
    measure(
        gjc,
        "acp",
        dirs,
        [
            (Some(init.to_string()), r#""id":0,"result""#),
            (Some(new), r#""id":1,"result""#),
        ],
    )
}

fn rpc(gjc: &Path, dirs: (&Path, &Path)) -> Sample {
    let state = r#"{"id":"1","type":"get_state"}"#.to_string();
    measure(
        gjc,
        "rpc",
        dirs,
        [(None, r#""type":"ready""#), (Some(state), r#""response""#)],
    )
}

fn main() {
    let runs: usize = args().next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let gjc = gjc_bin();
    assert!(gjc.is_file(), "no gjc binary at {}", gjc.display());
    let agent = tempfile::tempdir().expect("agent dir");
    let project = tempfile::tempdir().expect("project dir");
    let project_path = project.path().canonicalize().unwrap();
    let dirs = (agent.path(), project_path.as_path());
    acp(&gjc, dirs);
    rpc(&gjc, dirs);
    let (mut a, mut r) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        a.push(acp(&gjc, dirs));
        r.push(rpc(&gjc, dirs));
    }
    println!(
        "{}, {runs} runs each, interleaved (median / p90):",
        gjc.display()
    );
    report("acp: spawn -> initialize answered (ms)", &a, |s| s.first);
    report("acp: spawn -> session/new answered (ms)", &a, |s| s.second);
    report("acp: idle RSS (MB)", &a, |s| s.rss_kib as f64 / 1024.0);
    report("rpc: spawn -> ready (ms)", &r, |s| s.first);
    report("rpc: spawn -> first get_state response (ms)", &r, |s| {
        s.second
    });
    report("rpc: idle RSS (MB)", &r, |s| s.rss_kib as f64 / 1024.0);
}

fn report(what: &str, samples: &[Sample], f: impl Fn(&Sample) -> f64) {
    let mut v: Vec<f64> = samples.iter().map(f).collect();
    let m = median(&mut v);
    println!("  {what:46} {m:8.3} (p90 {:8.3})", percentile(&mut v, 0.9));
}
