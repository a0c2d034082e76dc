//! Rule matching on a long streamed reply: 1,000 conditional rules whose DFAs thrash against one
//! rule, over 256 KiB of a/b text in 64-byte deltas (no rule fires). Prints the median wall time
//! of each and the ratio, and the peak resident set of the process.
//!
//! Run: `cargo bench --bench rules [-- RUNS]` (default 5 runs each). It measures the matcher alone,
//! in process: the cost a rule set adds to a turn's stream, without the model or the wire.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use gjc::protocol::message::StreamEvent;
use gjc::rules::{Injections, Level, Repeat, Rule, RuleSet};

const REPLY: usize = 256 * 1024;
const DELTA: usize = 64;

fn main() {
    let runs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(5);
    let deltas = reply();
    let one = median(runs, || turn(&rules(1), &deltas));
    let many = median(runs, || turn(&rules(1000), &deltas));
    println!("rules: 256 KiB reply in {DELTA}-byte deltas, median of {runs}");
    println!("  1 rule       {:>9.1} ms", ms(one));
    println!(
        "  1,000 rules  {:>9.1} ms  ({:.2}x the 1-rule turn)",
        ms(many),
        ratio(many, one)
    );
    println!("  peak RSS     {:>9.1} MB", peak_rss_kb() as f64 / 1024.0);
}

fn rules(n: usize) -> RuleSet {
    let rules = (0..n)
        .map(|i| Rule {
            name: format!("r{i}"),
            path: PathBuf::from(format!("/rules/r{i}.md")),
            content: String::new(),
            description: None,
            globs: Vec::new(),
            always_apply: false,
            condition: Some(format!("a[ab]{{18}}c{i}z")),
            scopes: Vec::new(),
            repeat: Repeat::Once,
            level: Level::User,
        })
        .collect();
    let mut warnings = Vec::new();
    let set = RuleSet::from_rules(rules, &mut warnings);
    assert!(warnings.is_empty(), "{warnings:?}");
    set
}

/// a/b text from xorshift: nearly every byte needs a new DFA state; no `c`, so nothing fires.
fn reply() -> Vec<StreamEvent> {
    let mut x: u32 = 2463534242;
    (0..REPLY / DELTA)
        .map(|_| {
            let delta: String = (0..DELTA)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    if x & 1 == 0 {
                        'a'
                    } else {
                        'b'
                    }
                })
                .collect();
            StreamEvent::TextDelta {
                content_index: 0,
                delta,
            }
        })
        .collect()
}

fn turn(set: &RuleSet, deltas: &[StreamEvent]) -> Duration {
    let start = Instant::now();
    let mut watch = set
        .watch(&Injections::default())
        .expect("conditional rules");
    for delta in deltas {
        assert!(set.check(&mut watch, delta).is_empty());
    }
    start.elapsed()
}

fn median(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let mut times: Vec<Duration> = (0..runs).map(|_| f()).collect();
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
